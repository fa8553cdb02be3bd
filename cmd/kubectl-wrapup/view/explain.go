// Package view shows wrapup's decisions to people: the explanation of a
// decision (Explain, made as the controller makes it, reading through
// package read) and the CompletionRecords' history. The kubectl plugin
// and the tests read through it; it writes nothing.
package view

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/decision"
	"github.com/wrapup-dev/wrapup/gc/read"
	"github.com/wrapup-dev/wrapup/gc/triggers"
)

// Explanation is what wrapup decides for one AppWrapper at one instant, and
// why: the controller's decision (decision.Decide) on what Explain read.
type Explanation struct {
	AppWrapper types.NamespacedName
	Phase      awv1beta2.AppWrapperPhase // as the AppWrapper's controller reports it
	At         time.Time
	decision.Decision
	// Notes say where what the reader saw may differ from what the
	// controller sees: a kind wrapup may not list though the reader may
	// read it, or what could not be checked.
	Notes []string
}

// ExplainOptions are what a tool may give Explain besides its reader:
// Workers reads MultiKueue's worker clusters (see ExplainWithWorkers);
// Access, when set, makes the decision with wrapup's rights rather than
// the reader's (a kind wrapup may not list is not watchable).
type ExplainOptions struct {
	Workers WorkerReader
	Access  triggers.AccessReview
}

// Explain says what wrapup does with the AppWrapper key at now, and why. It
// only reads, through r: the AppWrapper, its Namespace, every CompletionRule
// and the live trigger (at the version of the component template), and
// decides with decision.Decide, as the controller does. A reader outside
// the controller cannot know when wrapup first saw a failed trigger, so
// for a Running AppWrapper Explain gives the longest the failure grace
// period can still run, assuming DefaultFailureGracePeriod (the manager's
// flag may set another); nor the version the controller's REST mapper
// prefers, which for a CRD serving several may not be the template's. When
// r has a REST mapper (a client.Client does), a trigger kind it does not
// map counts as not served, and a cluster-scoped one as not watchable; a
// rule's Ready condition that says its kind is not served or not watchable
// stands, as the controller's watches said it. policies may be nil.
func Explain(ctx context.Context, r client.Reader, policies *celpolicies.Cache, key types.NamespacedName, now time.Time) (*Explanation, error) {
	return ExplainWithWorkers(ctx, r, nil, policies, key, now)
}

// WorkerReader gives a reader of the MultiKueue worker cluster named
// cluster (its MultiKueueCluster's name).
type WorkerReader func(ctx context.Context, cluster string) (client.Reader, error)

// ExplainWithWorkers is Explain, reading through workers, for an AppWrapper
// that MultiKueue dispatches, the worker cluster it runs on, as the
// controller does: MultiKueue's copy there and the trigger. Without
// workers, such an AppWrapper's worker counts as unreadable.
func ExplainWithWorkers(ctx context.Context, r client.Reader, workers WorkerReader, policies *celpolicies.Cache, key types.NamespacedName, now time.Time) (*Explanation, error) {
	return ExplainWith(ctx, r, ExplainOptions{Workers: workers}, policies, key, now)
}

// ExplainWith is Explain with options.
func ExplainWith(ctx context.Context, r client.Reader, opts ExplainOptions, policies *celpolicies.Cache, key types.NamespacedName, now time.Time) (*Explanation, error) {
	var notes []string
	v := &read.Reader{Client: r, Labelled: true, Kinds: ServedKinds(ctx, r, opts.Access, &notes), RuleStatus: true}
	if opts.Workers != nil {
		// The worker of aw: its Workload read through r (listed, as a tool
		// has no index), the copy and the triggers through the worker's reader.
		v.Workers = func(ctx context.Context, aw *awv1beta2.AppWrapper) (*decision.Worker, read.TriggerView) {
			wl, err := read.FindWorkload(ctx, emptyReader{}, r, aw)
			var wr client.Reader
			w := read.WorkerOf(ctx, aw, wl, err, func(cluster string) (_ client.Reader, err error) {
				wr, err = opts.Workers(ctx, cluster)
				return wr, err
			})
			if w.Problem != "" || wr == nil {
				return w, nil
			}
			return w, &read.Reader{Client: wr, Labelled: true, Kinds: ServedKinds(ctx, wr, nil, nil)}
		}
	}
	in, err := read.Gather(ctx, v, cmp.Or(policies, &celpolicies.Cache{}), key, nil, decision.Input{Now: now})
	if err != nil {
		return nil, err
	}
	if in.AppWrapper == nil {
		return nil, fmt.Errorf("reading appwrapper %s: %w", key,
			apierrors.NewNotFound(awv1beta2.GroupVersion.WithResource("appwrappers").GroupResource(), key.Name))
	}
	ex := ExplainInput(ctx, in)
	ex.Notes = notes
	return ex, nil
}

// emptyReader is a cache with nothing in it.
type emptyReader struct{}

func (emptyReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return apierrors.NewNotFound(schema.GroupResource{}, "")
}

func (emptyReader) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// ServedKinds says, from r's REST mapper when it has one, which trigger
// kinds the API server serves; nil (every kind counts as served) without.
// With access, a kind wrapup may not list is not watchable, as the
// controller finds it; notes say so, or that the review could not be made
// (the reader's view then stands).
func ServedKinds(ctx context.Context, r client.Reader, access triggers.AccessReview, notes *[]string) func(schema.GroupKind) decision.Kind {
	m, ok := r.(interface{ RESTMapper() apimeta.RESTMapper })
	if !ok || m.RESTMapper() == nil {
		return nil
	}
	mapper, known := m.RESTMapper(), map[schema.GroupKind]decision.Kind{}
	if notes == nil {
		notes = new([]string)
	}
	return func(gk schema.GroupKind) decision.Kind {
		if k, ok := known[gk]; ok {
			return k
		}
		m, err := mapper.RESTMapping(gk)
		k := decision.Kind{State: decision.KindWatched}
		switch {
		case err != nil && apimeta.IsNoMatchError(err):
			k = decision.Kind{State: decision.KindNotServed, Message: err.Error()}
		case err == nil && m.Scope.Name() != apimeta.RESTScopeNameNamespace:
			k = decision.Kind{State: decision.KindNotWatchable, Message: fmt.Sprintf("trigger kind %s is cluster-scoped", gk)}
		case err == nil && access != nil:
			allowed, why, aerr := access(ctx, m.Resource)
			switch {
			case aerr != nil:
				*notes = append(*notes, fmt.Sprintf("whether wrapup may list %s could not be checked (%v): it is taken as watchable, as you may read it", m.Resource.GroupResource(), aerr))
			case !allowed:
				k = decision.Kind{State: decision.KindNotWatchable, Message: why}
				*notes = append(*notes, fmt.Sprintf("%s: the controller does not see triggers of %s, whatever you may read", why, gk))
			}
		}
		known[gk] = k
		return k
	}
}

// ExplainInput is the explanation of a decision on in.
func ExplainInput(ctx context.Context, in decision.Input) *Explanation {
	return &Explanation{
		AppWrapper: client.ObjectKeyFromObject(in.AppWrapper),
		Phase:      in.AppWrapper.Status.Phase,
		At:         in.Now,
		Decision:   decision.Decide(ctx, in),
	}
}

// String renders the explanation for people, in the manner of kubectl
// describe.
func (ex *Explanation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "AppWrapper: %s (phase %s) at %s\n", ex.AppWrapper, phaseOrNone(ex.Phase), ex.At.UTC().Format(time.RFC3339))
	fmt.Fprintf(&b, "Verdict:    %s", ex.Verdict)
	if ex.After > 0 {
		fmt.Fprintf(&b, pick(ex.Verdict == decision.VerdictWaitingForRetries, " (final in at most %s)", " (in %s)"), ex.After.Round(time.Second))
	}
	fmt.Fprintf(&b, "\n            %s\n", ex.Reason)
	b.WriteString(pick(len(ex.Rules) == 0, "Rules:      none\n", "Rules:\n"))
	table(&b, ex.Rules, func(v decision.RuleStanding) string {
		return fmt.Sprintf("  %s %s\tpriority %d\tReady %s\t%s", pick(v.Wins, "*", " "), v.Name, v.Priority, cmp.Or(v.Ready, "-"), v.Why)
	})
	ex.writeTriggers(&b)
	if rec := ex.Recorded; rec != nil {
		fmt.Fprintf(&b, "Recorded:   %s by rule %s at %s%s\n", rec.Outcome, rec.Rule, rec.FinishedAt.UTC().Format(time.RFC3339Nano), pick(rec.Message != "", ": "+rec.Message, ""))
		if st := rec.Stamp; st.Rule != "" {
			fmt.Fprintf(&b, "In force:   rule %s's %s", st.Rule, st.Action.Action)
			switch {
			case st.DryRun:
				b.WriteString(" in dry-run mode")
			case !st.DueAt.IsZero():
				fmt.Fprintf(&b, ", deleting from %s", st.DueAt.UTC().Format(time.RFC3339Nano))
			}
			b.WriteString(" (the run's CompletionRecord)\n")
		}
	} else {
		b.WriteString("Recorded:   no outcome\n")
	}
	for _, n := range ex.Notes {
		fmt.Fprintf(&b, "Note:       %s\n", n)
	}
	return b.String()
}

// writeTriggers writes the trigger, or the candidates, where they were
// read, and the evaluation.
func (ex *Explanation) writeTriggers(b *strings.Builder) {
	if t := ex.Trigger; t != nil {
		gvk, how := t.GroupVersionKind(), pick(t.Annotated, "annotated "+wrapupv1alpha1.TriggerAnnotation, "by kind")
		fmt.Fprintf(b, "Trigger:    %s %s %s, component %d (%s)%s\n", gvk.GroupVersion(), gvk.Kind, cmp.Or(t.Name, noName), t.Index, how, pick(t.UID != "", ", uid "+string(t.UID), ""))
		field(b, "", pick(t.Problem != "", "not evaluated: "+t.Problem, ""))
	}
	if w := ex.Worker; w != nil {
		switch {
		case w.Cluster == "":
			b.WriteString("Worker:     none: MultiKueue has not dispatched the AppWrapper yet\n")
		case w.CopyUID != "" && w.Problem == "":
			fmt.Fprintf(b, "Worker:     %s (MultiKueue): its copy uid %s, phase %s; the trigger was read there\n", w.Cluster, w.CopyUID, phaseOrNone(w.CopyPhase))
		case w.CopyUID != "":
			fmt.Fprintf(b, "Worker:     %s (MultiKueue): an AppWrapper of this name, uid %s, phase %s\n", w.Cluster, w.CopyUID, phaseOrNone(w.CopyPhase))
		default:
			fmt.Fprintf(b, "Worker:     %s (MultiKueue)\n", w.Cluster)
		}
		field(b, "", pick(w.Cluster != "", w.Problem, ""))
	}
	if len(ex.Candidates) > 0 {
		fmt.Fprintf(b, "Triggers:   %d candidates, policy %s (* decided the outcome)\n", len(ex.Candidates), ex.Policy)
	}
	table(b, ex.Candidates, func(c decision.Candidate) string {
		gvk, detail := c.GroupVersionKind(), c.Problem
		if e := c.Evaluation; e != nil {
			detail = pick(e.Error != "", "not finished: "+e.Error, cmp.Or(e.Message, detail))
		}
		return fmt.Sprintf("  %s %s %s %s\tcomponent %d\t%s\t%s", pick(c.Decided, "*", " "), gvk.GroupVersion(), gvk.Kind, cmp.Or(c.Name, noName), c.Index, c.State, decision.Truncate(detail, 200))
	})
	if e := ex.Evaluation; e != nil {
		switch {
		case e.FromAppWrapperPhase:
			fmt.Fprintf(b, "Evaluation: %s, from the AppWrapper's phase (the trigger is not evaluated)\n", e.Outcome)
		case e.Error != "":
			fmt.Fprintf(b, "Evaluation: not finished: %s\n", e.Error)
		default:
			fmt.Fprintf(b, "Evaluation: %s (cost %d; success %s, failure %s)\n", e.Outcome, e.Cost,
				pick(e.BuiltinSuccess, "built-in", "from the rule"), pick(e.BuiltinFailure, "built-in", "from the rule"))
		}
		field(b, "Message:", e.Message)
	}
}

// DescribeAction says what rule does once a trigger finished with outcome,
// as the controller does it: the action (DeleteAll by default), its TTL,
// and dry-run mode. It is for tools that show a rule's effect offline.
func DescribeAction(rule *wrapupv1alpha1.CompletionRule, outcome wrapupv1alpha1.Outcome) string {
	a := decision.ActionFor(rule, outcome)
	when := "at once"
	if ttl := a.TTLSecondsAfterFinished; ttl != nil && *ttl > 0 {
		when = fmt.Sprintf("%s after the trigger finished", time.Duration(*ttl)*time.Second)
	}
	what := "DeleteAll: record the outcome, then delete the AppWrapper " + when
	switch {
	case a.Action == wrapupv1alpha1.ActionUpdateStatus:
		what = "UpdateStatus: record the outcome on the AppWrapper, delete nothing"
	case rule.Spec.DryRun:
		what = "dryRun: record the outcome and emit a WouldDelete Event, delete nothing (without dryRun: delete the AppWrapper " + when + ")"
	}
	return what + pick(outcome == wrapupv1alpha1.OutcomeFailed, "; a failure is final only once the AppWrapper controller stops retrying", "")
}

// table writes a row of each item, its columns aligned at their tabs.
func table[T any](b *strings.Builder, items []T, row func(T) string) {
	tw := tabwriter.NewWriter(b, 0, 4, 2, ' ', 0)
	for _, it := range items {
		fmt.Fprintln(tw, row(it))
	}
	_ = tw.Flush()
}

// field writes a label and its value, as kubectl describe does, when the
// value is set; a continuation line has no label.
func field(b *strings.Builder, label, value string) {
	if value != "" {
		fmt.Fprintf(b, "%-12s%s\n", label, value)
	}
}

// pick is yes if cond holds, else no.
func pick[T any](cond bool, yes, no T) T {
	if cond {
		return yes
	}
	return no
}

func phaseOrNone(p awv1beta2.AppWrapperPhase) string { return cmp.Or(string(p), "not started") }

const noName = "(name not generated yet)"
