// Command asynq-bench measures asynq (github.com/hibiken/asynq, a Go task queue on
// Redis) the way `tranche --broker redis://… bench engine` measures Tranche on Redis:
//
//  1. enqueue N no-op tasks first, from -enqueuers goroutines sharing one
//     asynq.Client, timed as enqueue_seconds. asynq has no batch enqueue: each
//     Client.Enqueue is one EVALSHA round trip (its enqueue script writes the task
//     hash and LPUSHes the id onto the pending list); concurrency comes from the
//     several enqueuers over the client's connection pool;
//  2. then start one asynq.Server with Config.Concurrency = -workers and time until
//     every task is done, as process_seconds. A task counts as done once asynq has
//     run its "done" script (which also bumps the queue's processed counter): the
//     handlers count themselves, and once they reach N the program polls the
//     Inspector until ProcessedTotal == N, so the last acknowledgements are included;
//  3. end_to_end_per_sec = N / (enqueue_seconds + process_seconds).
//
// Settings (asynq's normal, documented API; chosen for throughput, all else default):
//   - one queue, "default"; Concurrency = -workers (default 10, as in asynq's own
//     benchmarks); the server's processor fetches one task per Dequeue script call
//     (asynq has no batch dequeue), so more workers mostly add goroutines;
//   - LogLevel warn; tasks are deleted on success (no Retention), MaxRetry default (25);
//   - the payload is the enqueue time (8 bytes), so the handler can record
//     enqueue→handler latency; p50_ms / p99_ms are that (the handler runs right
//     before the done script, so it is close to Tranche's runnable→done, which
//     ends at the committed result).
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
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

const taskType = "noop"

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
	jobs := flag.Int("jobs", 100000, "number of no-op tasks")
	workers := flag.Int("workers", 10, "asynq Config.Concurrency")
	enqueuers := flag.Int("enqueuers", 4, "goroutines enqueueing")
	flag.Parse()
	if err := run(*addr, *jobs, *workers, *enqueuers); err != nil {
		fmt.Fprintln(os.Stderr, "asynq-bench:", err)
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
	ctx := context.Background()
	redisOpt := asynq.RedisClientOpt{Addr: addr, PoolSize: max(10, 2*enqueuers)}
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

	fmt.Fprintf(os.Stderr, "asynq-bench: asynq %s, %d no-op tasks, %d enqueuers, concurrency %d, redis %s\n",
		version(), jobs, enqueuers, workers, addr)
	client := asynq.NewClient(redisOpt)
	defer client.Close()
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
			payload := make([]byte, 8)
			for range share {
				binary.LittleEndian.PutUint64(payload, uint64(time.Now().UnixNano()))
				if _, err := client.EnqueueContext(ctx, asynq.NewTask(taskType, slices.Clone(payload))); err != nil {
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

	latencies := make([]uint32, jobs) // microseconds, enqueue → handler
	var handled atomic.Int64
	mux := asynq.NewServeMux()
	mux.HandleFunc(taskType, func(_ context.Context, t *asynq.Task) error {
		us := time.Since(time.Unix(0, int64(binary.LittleEndian.Uint64(t.Payload())))).Microseconds()
		if i := handled.Add(1) - 1; i < int64(jobs) {
			latencies[i] = uint32(min(us, int64(^uint32(0))))
		}
		return nil
	})
	srv := asynq.NewServer(redisOpt, asynq.Config{
		Concurrency: workers,
		Queues:      map[string]int{"default": 1},
		LogLevel:    asynq.WarnLevel,
	})
	inspector := asynq.NewInspector(redisOpt)
	defer inspector.Close()

	processStart := time.Now()
	if err := srv.Start(mux); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	last, lastChange := int64(-1), time.Now()
	for tick := time.NewTicker(5 * time.Millisecond); ; <-tick.C {
		h := handled.Load()
		if h != last {
			if h/20000 != last/20000 {
				fmt.Fprintf(os.Stderr, "  handled: %d/%d\n", h, jobs)
			}
			last, lastChange = h, time.Now()
		} else if time.Since(lastChange) > 60*time.Second {
			return fmt.Errorf("no task handled for 60s (%d of %d)", h, jobs)
		}
		if h < int64(jobs) {
			continue
		}
		qi, err := inspector.GetQueueInfo("default")
		if err != nil {
			return fmt.Errorf("inspector: %w", err)
		}
		if qi.ProcessedTotal >= jobs {
			if qi.FailedTotal != 0 || qi.Size != 0 {
				return fmt.Errorf("expected %d succeeded tasks and an empty queue, got %d failed, %d left", jobs, qi.FailedTotal, qi.Size)
			}
			break
		}
	}
	processTime := time.Since(processStart)
	srv.Shutdown()
	memAfterProcess, err := usedMemory(ctx, rdb)
	if err != nil {
		return err
	}

	slices.Sort(latencies)
	pct := func(p float64) float64 {
		return float64(latencies[int(float64(len(latencies)-1)*p+0.5)]) / 1000
	}
	n := float64(jobs)
	return json.NewEncoder(os.Stdout).Encode(report{
		Peer:                   "asynq",
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

// version is the asynq module version this binary was built with.
func version() string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, m := range info.Deps {
			if m.Path == "github.com/hibiken/asynq" {
				return m.Version
			}
		}
	}
	return "unknown"
}
