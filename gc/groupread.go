package gc

import (
	"context"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// groupRead shares reads among the callers that can use them, as a
// database's group commit shares log flushes, with up to max reads in
// flight: a caller sends a read of its own at once while fewer than max
// are, and otherwise waits for the next one, sent as soon as one returns
// and shared by every caller that arrives meanwhile. Every caller is
// given the answer to a read sent after it called.
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

// ruleLister lists the rules from the API server for the final checks.
//
// A LIST with no resourceVersion is a consistent read, which the API server
// answers once its watch cache has caught up with etcd's revision, read with
// a quorum GET as the read's first step (k8s.io/apiserver
// pkg/storage/cacher, watchCache.waitAndListConsistent). While reads wait,
// it asks etcd for progress at once if it last asked 100 ms ago or more,
// otherwise when those 100 ms are up, and every 100 ms while reads still
// wait (pkg/storage/cacher/progress, ConditionalProgressRequester.Run). The
// notification carries etcd's revision when etcd handled the request, so it
// answers every read that had read etcd's revision by then, whenever it was
// sent. So a check sends its own LIST at once, answered at the next
// notification or the one after; waiting for a LIST in flight, sent before
// it started and so of no use to it, would make it wait for one more. A
// read sent after a check starts sees every change committed before then,
// which is all the final check asks of it. Beyond maxRuleReads in flight,
// the checks share the next LIST (groupRead).
type ruleLister struct {
	g groupRead[[]wrapupv1alpha1.CompletionRule]
}

// newRuleLister returns a ruleLister that lists with r.
func newRuleLister(r client.Reader) *ruleLister {
	read := func(ctx context.Context) ([]wrapupv1alpha1.CompletionRule, error) {
		var list wrapupv1alpha1.CompletionRuleList
		err := r.List(ctx, &list)
		return list.Items, err
	}
	return &ruleLister{g: groupRead[[]wrapupv1alpha1.CompletionRule]{read: read, max: maxRuleReads}}
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
