package lifecycle

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestConcurrentStopHonoursItsDeadline: a Stop behind another whose drain
// is slow gives up at its own deadline, with an error wrapping ctx.Err(),
// as the package promises. It waited for the first without a deadline.
func TestConcurrentStopHonoursItsDeadline(t *testing.T) {
	var b Base
	if err := b.Start(context.Background(), "svc", func(context.Context) error { return nil }); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	draining := make(chan struct{})
	firstDone := make(chan error, 1)
	go func() {
		firstDone <- b.Stop(context.Background(), func(ctx context.Context) error {
			close(draining)
			<-release // a long drain: the first caller waits as long as it takes
			return nil
		})
	}()
	<-draining
	defer func() { close(release); <-firstDone }()

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	second := make(chan error, 1)
	go func() { second <- b.Stop(ctx, nil) }()
	// The first Stop's drain never ends before this returns (release is
	// closed by the deferred cleanup): a Stop that ignored its deadline
	// would block here until the test binary's timeout, which fails it.
	if err := <-second; err != nil && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Stop: %v, want nil or an error wrapping the deadline", err)
	}
}

// TestStopDuringStartCancelsRun: a Stop during a Start cancels the run
// context at once, which a start function may wait on, and then waits for
// the Start. It cancelled only after the Start, so a start function
// waiting on Run could never be released by Stop.
func TestStopDuringStartCancelsRun(t *testing.T) {
	var b Base
	inStart := make(chan struct{})
	unstick := make(chan struct{})
	started := make(chan error, 1)
	go func() {
		started <- b.Start(context.Background(), "svc", func(context.Context) error {
			close(inStart)
			select {
			case <-b.Run().Done(): // Stop ends what the service runs
				return b.Run().Err()
			case <-unstick: // only the test's cleanup
				return errors.New("unstuck by the test")
			}
		})
	}()
	<-inStart
	defer func() { close(unstick); <-started }()

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	stopped := make(chan error, 1)
	go func() { stopped <- b.Stop(ctx, nil) }()
	// The start function ends only when Run is cancelled (unstick is
	// closed by the deferred cleanup): a Stop that neither cancels Run nor
	// honours its deadline blocks here until the test binary's timeout.
	<-stopped
}

// TestStopWithEndedContextRunsStop: a Stop whose ctx has already ended,
// with no start or stop under way, still runs the stop function (which
// then gives up its own waits at once): callers stop with an expired
// deadline to cut what is left.
func TestStopWithEndedContextRunsStop(t *testing.T) {
	t.Parallel()
	for range 50 { // the wait for the transition must not race the ended ctx
		var b Base
		if err := b.Start(context.Background(), "svc", func(context.Context) error { return nil }); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		ran := false
		if err := b.Stop(ctx, func(context.Context) error { ran = true; return nil }); err != nil {
			t.Fatal(err)
		}
		if !ran {
			t.Fatal("Stop with an ended ctx did not run the stop function")
		}
	}
}
