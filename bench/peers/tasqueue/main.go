// Command tasqueue-bench measures Tasqueue (github.com/kalbhor/tasqueue/v2, Zerodha's
// Go job queue; Redis broker and Redis results store) the way
// `tranche --broker redis://… bench engine` measures Tranche on Redis:
//
//  1. enqueue N no-op jobs first, from -enqueuers goroutines sharing one
//     tasqueue.Server, timed as enqueue_seconds. v2.2.0 has no batch or pipelined
//     enqueue (v2.2.1 added an optional pipelining setting, but that version is not
//     available here): each Server.Enqueue is a SET of the job message in the results
//     store ("started") and an LPUSH onto the queue, two round trips; concurrency
//     comes from the several enqueuers over go-redis's connection pool;
//  2. then start the server with the task's TaskOpts.Concurrency = -workers and
//     time until every job is done, as process_seconds. A job counts as done once
//     Tasqueue has recorded its success (statusDone: ZADD to the results store's
//     success set, then SET of the "successful" job message): the handlers count
//     themselves, and once they reach N the program polls ZCARD of that set
//     (tq:res:success, the set behind Server.GetSuccess) until it holds N ids;
//  3. end_to_end_per_sec = N / (enqueue_seconds + process_seconds).
//
// Settings (Tasqueue's normal, documented API; chosen for throughput, all else default):
//   - one task on the default queue, Concurrency = -workers (default 10, as in
//     Tasqueue's own BenchmarkJob); the Redis broker's single consumer goroutine
//     BLPOPs one message at a time and hands it to the W processors;
//   - broker PollPeriod default (1 s, only a BLPOP timeout); results without expiry;
//   - JobOpts default: MaxRetries 0, no timeout; logger at warn level;
//   - note the delivery model: a job is removed from the list when it is popped,
//     so a worker killed mid-job loses it (no lease/ack), unlike asynq and Tranche;
//   - the payload is the enqueue time (8 bytes), so the handler can record
//     enqueue→handler latency (p50_ms / p99_ms; the success is recorded right after).
//
// Redis memory: the program reads INFO memory (used_memory) before and after the
// enqueue phase and after processing, on a FLUSHALLed server, and reports
// bytes_per_job = (after_enqueue - before) / N.
//
// One JSON line on stdout; progress on stderr.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-redis/redis/v8"
	"github.com/kalbhor/tasqueue/v2"
	rb "github.com/kalbhor/tasqueue/v2/brokers/redis"
	rr "github.com/kalbhor/tasqueue/v2/results/redis"
)

const (
	taskName   = "noop"
	successSet = "tq:res:success" // results/redis: resultPrefix + "success"
)

type report struct {
	Peer                   string  `json:"peer"`
	Version                string  `json:"version"`
	Jobs                   int     `json:"jobs"`
	Workers                int     `json:"workers"`
	Enqueuers              int     `json:"enqueuers"`
	EnqueueSeconds         float64 `json:"enqueue_seconds"`
	EnqueuePerSec          float64 `json:"enqueue_per_sec"`
	ProcessSeconds         float64 `json:"process_seconds"`
	ProcessPerSec          float64 `json:"process_per_sec"`
	EndToEndPerSec         float64 `json:"end_to_end_per_sec"`
	P50MS                  float64 `json:"p50_ms"`
	P99MS                  float64 `json:"p99_ms"`
	Latency                string  `json:"latency"`
	RedisMemBefore         int64   `json:"redis_used_memory_before"`
	RedisMemAfterEnqueue   int64   `json:"redis_used_memory_after_enqueue"`
	RedisMemAfterProcess   int64   `json:"redis_used_memory_after_process"`
	RedisBytesPerQueuedJob float64 `json:"redis_bytes_per_job"`
}

func main() {
	addr := flag.String("redis", "127.0.0.1:6379", "Redis address host:port")
	jobs := flag.Int("jobs", 100000, "number of no-op jobs")
	workers := flag.Int("workers", 10, "TaskOpts.Concurrency of the no-op task")
	enqueuers := flag.Int("enqueuers", 4, "goroutines enqueueing")
	flag.Parse()
	if err := run(*addr, *jobs, *workers, *enqueuers); err != nil {
		fmt.Fprintln(os.Stderr, "tasqueue-bench:", err)
		os.Exit(1)
	}
}

func usedMemory(ctx context.Context, rdb *redis.Client) (int64, error) {
	info, err := rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("no used_memory in INFO memory")
}

func run(addr string, jobs, workers, enqueuers int) error {
	if jobs < 1 || workers < 1 || enqueuers < 1 {
		return fmt.Errorf("-jobs, -workers and -enqueuers must be at least 1")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if n, err := rdb.DBSize(ctx).Result(); err != nil {
		return fmt.Errorf("redis %s: %w", addr, err)
	} else if n != 0 {
		return fmt.Errorf("redis %s holds %d keys: run on an empty (FLUSHALLed) server", addr, n)
	}
	memBefore, err := usedMemory(ctx, rdb)
	if err != nil {
		return err
	}

	lo := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := tasqueue.NewServer(tasqueue.ServerOpts{
		Broker:  rb.New(rb.Options{Addrs: []string{addr}}, lo),
		Results: rr.New(rr.Options{Addrs: []string{addr}}, lo),
		Logger:  lo.Handler(),
	})
	if err != nil {
		return err
	}
	latencies := make([]uint32, jobs) // microseconds, enqueue → handler
	var handled atomic.Int64
	err = srv.RegisterTask(taskName, func(payload []byte, _ tasqueue.JobCtx) error {
		us := time.Since(time.Unix(0, int64(binary.LittleEndian.Uint64(payload)))).Microseconds()
		if i := handled.Add(1) - 1; i < int64(jobs) {
			latencies[i] = uint32(min(us, int64(^uint32(0))))
		}
		return nil
	}, tasqueue.TaskOpts{Concurrency: uint32(workers)})
	if err != nil {
		return err
	}

	fmt.Fprintf(os.Stderr, "tasqueue-bench: tasqueue %s, %d no-op jobs, %d enqueuers, concurrency %d, redis %s\n",
		version(), jobs, enqueuers, workers, addr)
	var enqueued atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, enqueuers)
	enqueueStart := time.Now()
	for e := range enqueuers {
		share := jobs / enqueuers
		if e < jobs%enqueuers {
			share++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range share {
				payload := binary.LittleEndian.AppendUint64(nil, uint64(time.Now().UnixNano()))
				job, err := tasqueue.NewJob(taskName, payload, tasqueue.JobOpts{})
				if err == nil {
					_, err = srv.Enqueue(ctx, job)
				}
				if err != nil {
					errs <- fmt.Errorf("enqueue: %w", err)
					return
				}
				if n := enqueued.Add(1); n%20000 == 0 {
					fmt.Fprintf(os.Stderr, "  enqueued: %d/%d\n", n, jobs)
				}
			}
		}()
	}
	wg.Wait()
	enqueueTime := time.Since(enqueueStart)
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	memAfterEnqueue, err := usedMemory(ctx, rdb)
	if err != nil {
		return err
	}

	processStart := time.Now()
	go srv.Start(ctx)
	last, lastChange := int64(-1), time.Now()
	for tick := time.NewTicker(5 * time.Millisecond); ; <-tick.C {
		h := handled.Load()
		if h != last {
			if h/20000 != last/20000 {
				fmt.Fprintf(os.Stderr, "  handled: %d/%d\n", h, jobs)
			}
			last, lastChange = h, time.Now()
		} else if time.Since(lastChange) > 60*time.Second {
			return fmt.Errorf("no job handled for 60s (%d of %d)", h, jobs)
		}
		if h < int64(jobs) {
			continue
		}
		n, err := rdb.ZCard(ctx, successSet).Result()
		if err != nil {
			return err
		}
		if n >= int64(jobs) {
			break
		}
	}
	processTime := time.Since(processStart)
	cancel()
	ok, err := srv.GetSuccess(context.Background())
	if err != nil {
		return err
	}
	failed, err := srv.GetFailed(context.Background())
	if err != nil {
		return err
	}
	if len(ok) != jobs || len(failed) != 0 {
		return fmt.Errorf("expected %d successful jobs, got %d (failed %d)", jobs, len(ok), len(failed))
	}
	memAfterProcess, err := usedMemory(context.Background(), rdb)
	if err != nil {
		return err
	}

	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[int(float64(len(latencies)-1)*p+0.5)]) / 1000
	}
	n := float64(jobs)
	return json.NewEncoder(os.Stdout).Encode(report{
		Peer:                   "tasqueue",
		Version:                version(),
		Jobs:                   jobs,
		Workers:                workers,
		Enqueuers:              enqueuers,
		EnqueueSeconds:         enqueueTime.Seconds(),
		EnqueuePerSec:          n / enqueueTime.Seconds(),
		ProcessSeconds:         processTime.Seconds(),
		ProcessPerSec:          n / processTime.Seconds(),
		EndToEndPerSec:         n / (enqueueTime + processTime).Seconds(),
		P50MS:                  pct(0.50),
		P99MS:                  pct(0.99),
		Latency:                "enqueue to handler",
		RedisMemBefore:         memBefore,
		RedisMemAfterEnqueue:   memAfterEnqueue,
		RedisMemAfterProcess:   memAfterProcess,
		RedisBytesPerQueuedJob: float64(memAfterEnqueue-memBefore) / n,
	})
}

// version is the tasqueue module version this binary was built with.
func version() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == "github.com/kalbhor/tasqueue/v2" {
				return m.Version
			}
		}
	}
	return "unknown"
}
