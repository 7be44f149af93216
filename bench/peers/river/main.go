// Command river-bench measures River (github.com/riverqueue/river, a Go job
// queue on PostgreSQL) the way `tranche bench engine` measures Tranche:
//
//  1. enqueue N no-op jobs first (InsertMany, in batches of -batch), timed as
//     insert_seconds;
//  2. then start one client whose default queue runs -workers jobs at once
//     (goroutines, so all cores are used) and time until every job is
//     completed, as process_seconds (a job counts once River has committed its
//     completion, which is when it emits EventKindJobCompleted);
//  3. end to end = N / (insert_seconds + process_seconds).
//
// River runs with its defaults otherwise. Beware that those defaults cap
// throughput near workers / FetchCooldown (100 / 100ms = 1,000 jobs/s): a
// producer fetches at most MaxWorkers jobs and then waits out the cooldown.
// River's own `river bench` uses -fetch-cooldown 2ms -fetch-poll-interval 20ms
// and 2,000 workers; pass those to measure River tuned for throughput. The
// settings are echoed in the result, one JSON line on stdout; progress goes to
// stderr.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

type NoopArgs struct{}

func (NoopArgs) Kind() string { return "noop" }

type NoopWorker struct {
	river.WorkerDefaults[NoopArgs]
}

func (*NoopWorker) Work(context.Context, *river.Job[NoopArgs]) error { return nil }

type report struct {
	Peer                string  `json:"peer"`
	Version             string  `json:"version"`
	Jobs                int     `json:"jobs"`
	Workers             int     `json:"workers"`
	FetchCooldownMS     float64 `json:"fetch_cooldown_ms"`
	FetchPollIntervalMS float64 `json:"fetch_poll_interval_ms"`
	InsertSeconds       float64 `json:"insert_seconds"`
	InsertJobsPerSec    float64 `json:"insert_jobs_per_sec"`
	ProcessSeconds      float64 `json:"process_seconds"`
	ProcessJobsPerSec   float64 `json:"process_jobs_per_sec"`
	EndToEndJobsPerSec  float64 `json:"end_to_end_jobs_per_sec"`
}

func main() {
	dsn := flag.String("dsn", os.Getenv("DATABASE_URL"), "PostgreSQL connection string")
	jobs := flag.Int("jobs", 100000, "number of no-op jobs")
	workers := flag.Int("workers", 100, "MaxWorkers of the default queue")
	batch := flag.Int("batch", 10000, "jobs per InsertMany call")
	cooldown := flag.Duration("fetch-cooldown", river.FetchCooldownDefault, "River Config.FetchCooldown")
	poll := flag.Duration("fetch-poll-interval", river.FetchPollIntervalDefault, "River Config.FetchPollInterval")
	flag.Parse()
	if err := run(*dsn, *jobs, *workers, *batch, *cooldown, *poll); err != nil {
		fmt.Fprintln(os.Stderr, "river-bench:", err)
		os.Exit(1)
	}
}

func run(dsn string, jobs, workers, batch int, cooldown, poll time.Duration) error {
	if dsn == "" || jobs < 1 || workers < 1 || batch < 1 {
		return fmt.Errorf("need -dsn, and -jobs, -workers, -batch of at least 1")
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	driver := riverpgxv5.New(pool)

	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}

	ws := river.NewWorkers()
	river.AddWorker(ws, &NoopWorker{})
	client, err := river.NewClient(driver, &river.Config{
		FetchCooldown:     cooldown,
		FetchPollInterval: poll,
		Logger:            slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: workers}},
		Workers:           ws,
	})
	if err != nil {
		return err
	}
	// Subscribe before starting; a buffer of N events means none is dropped.
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: jobs,
		Kinds:    []river.EventKind{river.EventKindJobCompleted},
	})
	defer cancel()

	countCompleted := func() (n int, err error) {
		err = pool.QueryRow(ctx, "SELECT count(*) FROM river_job WHERE state = 'completed'").Scan(&n)
		return n, err
	}
	before, err := countCompleted()
	if err != nil {
		return err
	}

	fmt.Fprintf(os.Stderr, "river-bench: river %s, %d no-op jobs, %d workers, fetch cooldown %s, poll %s\n",
		riverVersion(), jobs, workers, cooldown, poll)
	params := make([]river.InsertManyParams, 0, batch)
	insertStart := time.Now()
	for done := 0; done < jobs; {
		n := min(batch, jobs-done)
		params = params[:0]
		for range n {
			params = append(params, river.InsertManyParams{Args: NoopArgs{}})
		}
		if _, err := client.InsertMany(ctx, params); err != nil {
			return fmt.Errorf("insert: %w", err)
		}
		done += n
		fmt.Fprintf(os.Stderr, "  inserted: %d/%d\n", done, jobs)
	}
	insertTime := time.Since(insertStart)

	processStart := time.Now()
	if err := client.Start(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	completed := 0
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for completed < jobs {
		select {
		case ev := <-events:
			if ev == nil {
				return fmt.Errorf("subscription closed after %d of %d jobs", completed, jobs)
			}
			completed++
		case <-tick.C:
			fmt.Fprintf(os.Stderr, "  completed: %d/%d\n", completed, jobs)
		case <-time.After(60 * time.Second):
			return fmt.Errorf("no job completed for 60s (%d of %d done)", completed, jobs)
		}
	}
	processTime := time.Since(processStart)

	stopCtx, stop := context.WithTimeout(ctx, 30*time.Second)
	defer stop()
	if err := client.Stop(stopCtx); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	// Cross-check the events against the table itself.
	after, err := countCompleted()
	if err != nil {
		return err
	}
	if after-before != jobs {
		return fmt.Errorf("expected %d more completed jobs in river_job, found %d", jobs, after-before)
	}

	n := float64(jobs)
	return json.NewEncoder(os.Stdout).Encode(report{
		Peer:                "river",
		Version:             riverVersion(),
		Jobs:                jobs,
		Workers:             workers,
		FetchCooldownMS:     float64(cooldown) / float64(time.Millisecond),
		FetchPollIntervalMS: float64(poll) / float64(time.Millisecond),
		InsertSeconds:       insertTime.Seconds(),
		InsertJobsPerSec:    n / insertTime.Seconds(),
		ProcessSeconds:      processTime.Seconds(),
		ProcessJobsPerSec:   n / processTime.Seconds(),
		EndToEndJobsPerSec:  n / (insertTime + processTime).Seconds(),
	})
}

// riverVersion is the river module version this binary was built with.
func riverVersion() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == "github.com/riverqueue/river" {
				return m.Version
			}
		}
	}
	return "unknown"
}
