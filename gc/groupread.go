package gc

import (
	"context"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// groupRead shares reads among callers, as a database's group commit shares
// log flushes: a caller sends a read of its own at once while fewer than
// max are in flight, and otherwise waits for the next one, sent as soon as
// one returns and shared by every caller that arrives meanwhile. Every
// caller is given the answer to a read sent after it called.
type groupRead[T any] struct {
	read func(context.Context) (T, error)
	max  int // reads in flight at most (0: one)

	mu       sync.Mutex
	inFlight int
	next     *groupCall[T] // not sent yet: the callers that arrive while max are in flight wait for it
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
// sends, or the next one. A caller whose ctx ends stops waiting; the read
// goes on for the others.
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
// when fewer than max are in flight, or else the next one.
func (g *groupRead[T]) join(ctx context.Context) *groupCall[T] {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.next != nil {
		return g.next
	}
	c := &groupCall[T]{ctx: context.WithoutCancel(ctx), done: make(chan struct{})}
	if g.inFlight < max(g.max, 1) {
		g.inFlight++
		go g.run(c)
	} else {
		g.next = c
	}
	return c
}

// run sends c's read, then, while callers wait for one, the next.
func (g *groupRead[T]) run(c *groupCall[T]) {
	for c != nil {
		ctx, cancel := context.WithTimeout(c.ctx, groupReadTimeout)
		c.val, c.err = g.read(ctx)
		cancel()
		g.mu.Lock()
		close(c.done)
		c, g.next = g.next, nil
		if c == nil {
			g.inFlight--
		}
		g.mu.Unlock()
	}
}

// maxRuleReads is how many LISTs of the rules the final checks keep in
// flight at once: each holds one of the API server's request seats while
// it waits (API Priority and Fairness), and all that wait at once are
// answered by the same progress notification, so more would add seats,
// not speed. DefaultWorkers final checks each send their own.
const maxRuleReads = DefaultWorkers

// ruleLister lists the rules from the API server for the final checks,
// each with a consistent LIST of its own, sent at once (docs/actions.md,
// "What the final check is guaranteed to see"): the API server answers it
// once its watch cache has caught up with etcd's revision, read first with
// a quorum GET (k8s.io/apiserver pkg/storage/cacher,
// watchCache.waitAndListConsistent), at the next progress notification or
// the one after (pkg/storage/cacher/progress,
// ConditionalProgressRequester.Run); a LIST in flight, sent before the
// check started and so of no use to it, would cost it one more. A read
// sent after a check starts sees every write committed before then, all
// the final check asks. Past maxRuleReads in flight, the checks share the
// next LIST (groupRead). Each caller is given its own copy.
type ruleLister func(context.Context) ([]wrapupv1alpha1.CompletionRule, error)

// newRuleLister returns a ruleLister that lists with r.
func newRuleLister(r client.Reader) ruleLister {
	g := &groupRead[[]wrapupv1alpha1.CompletionRule]{max: maxRuleReads, read: func(ctx context.Context) ([]wrapupv1alpha1.CompletionRule, error) {
		var list wrapupv1alpha1.CompletionRuleList
		err := r.List(ctx, &list)
		return list.Items, err
	}}
	return func(ctx context.Context) ([]wrapupv1alpha1.CompletionRule, error) {
		rules, err := g.Do(ctx)
		if err != nil {
			return nil, err
		}
		out := make([]wrapupv1alpha1.CompletionRule, len(rules))
		for i := range rules {
			rules[i].DeepCopyInto(&out[i])
		}
		return out, nil
	}
}
