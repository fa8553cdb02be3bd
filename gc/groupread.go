package gc

import (
	"context"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// groupRead shares one read among the callers that can use it, as a
// database's group commit shares one log flush: every caller is given the
// answer to a read sent after it called. At most one read is in flight;
// the callers that arrive while it is join the next one, which is sent
// when the first returns, for all of them at once.
//
// The final check lists the rules with a consistent read (no
// resourceVersion), which the API server answers only once its watch cache
// has caught up with etcd's revision at the time of the request: it asks
// etcd for progress at most every 100 ms while reads wait
// (k8s.io/apiserver pkg/storage/cacher/progress,
// ConditionalProgressRequester.Run). Sent once per final check, those
// waits add up and hold the workers; shared, one serves all the final
// checks that start while another is in flight. Each still sees every
// change committed before it started (a read sent after a caller starts
// is answered at a revision no older than any write committed before
// then), which is all the final check asks of it. More reads in flight
// (a check sending its own at once while fewer than four were) made the
// steady load's tail longer in test/bench/throughput, not shorter
// (docs/actions.md): a read that waits holds a request of the API
// server's, on the cores it shares.
type groupRead[T any] struct {
	read func(context.Context) (T, error)

	mu   sync.Mutex
	sent *groupCall[T]
	next *groupCall[T]
}

// groupReadTimeout bounds a shared read: a read that hangs would hold
// every caller that waits for it, which no caller's own deadline would end.
const groupReadTimeout = 30 * time.Second

// groupCall is one read and the callers waiting for it.
type groupCall[T any] struct {
	ctx  context.Context
	done chan struct{}
	val  T
	err  error
}

// Do returns the answer of a read sent after Do was called: the one it
// sends, or the next one after the read in flight. A caller whose ctx
// ends stops waiting; the read goes on for the others.
func (g *groupRead[T]) Do(ctx context.Context) (T, error) {
	c := g.join(ctx)
	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// join returns the read the caller waits for: a new one, sent at once
// when none is in flight, or else the next one.
func (g *groupRead[T]) join(ctx context.Context) *groupCall[T] {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sent != nil {
		if g.next == nil {
			g.next = &groupCall[T]{ctx: context.WithoutCancel(ctx), done: make(chan struct{})}
		}
		return g.next
	}
	g.sent = &groupCall[T]{ctx: context.WithoutCancel(ctx), done: make(chan struct{})}
	go g.run(g.sent)
	return g.sent
}

// run sends c's read, then the next one's, until none waits.
func (g *groupRead[T]) run(c *groupCall[T]) {
	for c != nil {
		ctx, cancel := context.WithTimeout(c.ctx, groupReadTimeout)
		c.val, c.err = g.read(ctx)
		cancel()
		g.mu.Lock()
		close(c.done)
		c, g.sent, g.next = g.next, g.next, nil
		g.mu.Unlock()
	}
}

// ruleLister lists the rules from the API server, one consistent LIST
// shared by every final check that starts while another is in flight.
type ruleLister struct {
	g groupRead[[]wrapupv1alpha1.CompletionRule]
}

func newRuleLister(r client.Reader) *ruleLister {
	l := &ruleLister{}
	l.g.read = func(ctx context.Context) ([]wrapupv1alpha1.CompletionRule, error) {
		var list wrapupv1alpha1.CompletionRuleList
		if err := r.List(ctx, &list); err != nil {
			return nil, err
		}
		return list.Items, nil
	}
	return l
}

// List returns the rules as a read sent after it was called saw them,
// each caller its own copy.
func (l *ruleLister) List(ctx context.Context) ([]wrapupv1alpha1.CompletionRule, error) {
	rules, err := l.g.Do(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]wrapupv1alpha1.CompletionRule, len(rules))
	for i := range rules {
		rules[i].DeepCopyInto(&out[i])
	}
	return out, nil
}
