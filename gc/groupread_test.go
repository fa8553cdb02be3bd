package gc

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
)

// blockingRead is a read that returns its own sequence number once let go.
type blockingRead struct {
	started atomic.Int64
	release chan struct{}
}

func (b *blockingRead) read(context.Context) (int64, error) {
	n := b.started.Add(1)
	<-b.release
	return n, nil
}

func TestGroupReadSharesTheNextRead(t *testing.T) {
	g := NewWithT(t)
	b := &blockingRead{release: make(chan struct{})}
	gr := &groupRead[int64]{read: b.read}
	ctx := context.Background()

	first := gr.join(ctx)
	g.Eventually(b.started.Load).Should(Equal(int64(1)))
	// Called while the first read is in flight: they wait for the next,
	// which is not sent before the first returns.
	second, third := gr.join(ctx), gr.join(ctx)
	g.Expect(second).To(BeIdenticalTo(third))
	g.Expect(second).NotTo(BeIdenticalTo(first))
	g.Consistently(b.started.Load).Should(Equal(int64(1)))

	b.release <- struct{}{}
	<-first.done
	g.Expect(first.val).To(Equal(int64(1)))
	g.Eventually(b.started.Load).Should(Equal(int64(2)))
	g.Expect(second.done).NotTo(BeClosed())
	b.release <- struct{}{}
	<-second.done
	g.Expect(second.val).To(Equal(int64(2)))

	// Nothing in flight: the next caller sends its own read at once.
	close(b.release)
	v, err := gr.Do(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(Equal(int64(3)))
}

// Every caller is answered by a read sent after it called, however the
// callers and the reads interleave, with never more than max in flight.
func TestGroupReadAnswersWithAReadSentAfterTheCall(t *testing.T) {
	for _, most := range []int{1, 4} {
		t.Run(fmt.Sprint(most), func(t *testing.T) {
			var started, inFlight, peak atomic.Int64
			gr := &groupRead[int64]{max: most, read: func(context.Context) (int64, error) {
				n := started.Add(1)
				f := inFlight.Add(1)
				for p := peak.Load(); f > p && !peak.CompareAndSwap(p, f); p = peak.Load() {
				}
				for range 100 { // a round trip, for callers to arrive during
					runtime.Gosched()
				}
				inFlight.Add(-1)
				return n, nil
			}}
			var wg sync.WaitGroup
			var late atomic.Int64
			const callers, calls = 16, 500
			for range callers {
				wg.Go(func() {
					for range calls {
						before := started.Load()
						got, err := gr.Do(context.Background())
						if err != nil || got <= before {
							late.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if late.Load() != 0 {
				t.Fatalf("%d calls were answered by a read sent before they called", late.Load())
			}
			if peak.Load() > int64(most) {
				t.Fatalf("%d reads in flight at once, at most %d wanted", peak.Load(), most)
			}
			t.Logf("%d calls, %d reads, at most %d at once", callers*calls, started.Load(), peak.Load())
		})
	}
}

// Up to max reads go at once; a caller that finds max in flight waits for
// the next, sent as soon as one returns and shared by the callers that
// arrived meanwhile.
func TestGroupReadSendsUpToMaxAtOnce(t *testing.T) {
	g := NewWithT(t)
	b := &blockingRead{release: make(chan struct{})}
	gr := &groupRead[int64]{read: b.read, max: 2}
	ctx := context.Background()

	first, second := gr.join(ctx), gr.join(ctx)
	g.Expect(first).NotTo(BeIdenticalTo(second))
	g.Eventually(b.started.Load).Should(Equal(int64(2)))
	third, fourth := gr.join(ctx), gr.join(ctx)
	g.Expect(third).To(BeIdenticalTo(fourth))
	g.Expect(third).NotTo(BeIdenticalTo(first))
	g.Expect(third).NotTo(BeIdenticalTo(second))
	g.Consistently(b.started.Load).Should(Equal(int64(2)))

	b.release <- struct{}{}
	g.Eventually(b.started.Load).Should(Equal(int64(3)))
	g.Expect(third.done).NotTo(BeClosed())
	close(b.release)
	<-first.done
	<-second.done
	<-third.done
	g.Expect([]int64{first.val, second.val}).To(ConsistOf(int64(1), int64(2)))
	g.Expect(third.val).To(Equal(int64(3)))

	// Nothing in flight: a caller sends its own at once.
	v, err := gr.Do(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(Equal(int64(4)))
}

func TestGroupReadErrorsAndCancel(t *testing.T) {
	g := NewWithT(t)
	boom := errors.New("boom")
	release := make(chan struct{})
	gr := &groupRead[int]{read: func(context.Context) (int, error) {
		<-release
		return 0, boom
	}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := gr.Do(ctx)
		done <- err
	}()
	cancel()
	g.Eventually(done).Should(Receive(MatchError(context.Canceled)))
	// The read goes on for the others; its error reaches them.
	close(release)
	_, err := gr.Do(context.Background())
	g.Expect(err).To(MatchError(boom))
}
