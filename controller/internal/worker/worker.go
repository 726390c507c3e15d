// Package worker runs the standard controller loop over a rate-limited
// workqueue: each key is handed to a sync function by one worker at a time;
// a failed sync is retried with per-key exponential backoff up to MaxRetries
// times, after which the key is dropped (a later event re-queues it).
package worker

import (
	"context"
	"log/slog"
	"sync"

	"k8s.io/client-go/util/workqueue"
)

// MaxRetries is how many times a failing key is retried before it is
// dropped, as in Kubernetes' controllers.
const MaxRetries = 15

// NewQueue returns a named rate-limited queue of string keys with the
// default controller rate limiter (per-item exponential backoff from 5ms to
// 1000s, and an overall token bucket).
func NewQueue(name string) workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: name},
	)
}

// Run starts workers goroutines that process q with sync until ctx is
// cancelled, then shuts the queue down and waits for them.
func Run(ctx context.Context, log *slog.Logger, q workqueue.TypedRateLimitingInterface[string], workers int, sync func(context.Context, string) error) {
	if workers < 1 {
		workers = 1
	}
	var wg waitGroup
	for i := 0; i < workers; i++ {
		wg.Go(func() {
			for processNext(ctx, log, q, sync) {
			}
		})
	}
	<-ctx.Done()
	q.ShutDown()
	wg.Wait()
}

type waitGroup struct{ sync.WaitGroup }

func processNext(ctx context.Context, log *slog.Logger, q workqueue.TypedRateLimitingInterface[string], sync func(context.Context, string) error) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	defer q.Done(key)
	err := sync(ctx, key)
	if err == nil {
		q.Forget(key)
		return true
	}
	if q.NumRequeues(key) < MaxRetries {
		log.Info("sync failed, retrying", "key", key, "err", err)
		q.AddRateLimited(key)
		return true
	}
	log.Warn("sync failed, dropping key out of the queue", "key", key, "err", err)
	q.Forget(key)
	return true
}
