package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/cmd/kubectl-wrapup/view"
	"github.com/wrapup-dev/wrapup/gc/decision"
)

const planLong = `Say, before CompletionRules are applied, what wrapup would do with each
live AppWrapper once they are, beside what it does now: which AppWrappers
change rule or verdict, which would be deleted at once (an action or dryRun
change reaching runs already recorded), which would be blocked (a rule that
cannot be used). The rules of the files replace the cluster's rules of the
same name, or are added; --delete NAME plans a rule's removal.

It reads the cluster with your rights (the AppWrappers, rules, Namespaces
and triggers) and decides with the controller's decision code, twice: under
the rules as they are and as they would be. Nothing is written. A change
that would make a recorded run's deletion sooner counts its TTL from now,
as the controller counts it (the run's CompletionRecord keeps the action
in force).`

// planOptions are plan's flags: kubectl's Validate, Run.
type planOptions struct {
	src                       sources
	remove                    []string
	all                       bool
	output, workerSecrets, sa string
	workerFiles               map[string]string

	cf      *genericclioptions.ConfigFlags
	cluster clientGetter
	streams genericiooptions.IOStreams
}

func newPlanCommand(cf *genericclioptions.ConfigFlags, cluster clientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := &planOptions{cf: cf, cluster: cluster, streams: streams}
	cmd := &cobra.Command{
		Use:   "plan (-f RULES | --delete RULE)... [-n NAMESPACE]",
		Short: "Say what a rule change would do to the live AppWrappers, before it is applied",
		Long:  planLong,
		Example: examples(
			"# What applying the edited rules would change",
			"kubectl wrapup plan -f rules/",
			"",
			"# What removing a rule would change, in one namespace, every AppWrapper listed",
			"kubectl wrapup plan --delete benchmarks -n team-a --all",
		),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	addSourceFlags(cmd, &o.src, "the CompletionRules to apply")
	cmd.Flags().StringSliceVar(&o.remove, "delete", nil, "Plan the removal of the cluster's CompletionRule of this name; repeatable.")
	cmd.Flags().BoolVar(&o.all, "all", false, "List every AppWrapper, not only those the change changes.")
	addOutputFlag(cmd, &o.output, "Output format: json or yaml (default: a table).", "json", "yaml")
	cmd.Flags().StringToStringVar(&o.workerFiles, "worker-kubeconfig", nil,
		"For AppWrappers that MultiKueue dispatched: the kubeconfig file of a worker cluster, as MULTIKUEUECLUSTER=PATH (repeatable; default: wrapup's kubeconfig Secret of that name).")
	cmd.Flags().StringVar(&o.workerSecrets, "worker-secrets-namespace", "", workerSecretsUsage)
	cmd.Flags().StringVar(&o.sa, "wrapup-service-account", "", saFlagUsage("decisions are made with its rights (which trigger kinds it may list)"))
	return cmd
}

// Validate checks that a change is given, and the flags.
func (o *planOptions) Validate() error {
	if o.src.empty() && len(o.remove) == 0 {
		return errors.New("plan needs the change: -f RULES (rules to apply) or --delete RULE")
	}
	if err := checkOutput(o.output, "json", "yaml"); err != nil {
		return err
	}
	if o.sa == "" {
		return nil
	}
	return checkServiceAccount(o.sa)
}

// Run reads the rules of the change, checks them as the API server and
// the webhook would, and plans the change against the live cluster.
func (o *planOptions) Run(ctx context.Context) error {
	docs, _, err := o.src.read(o.streams.In)
	if err != nil {
		return failed("%v", err)
	}
	objs, findings, err := loadOffline(ctx, docs, "default")
	if err != nil {
		return failed("%v", err)
	}
	for _, f := range findings {
		if f.Severity == sevError {
			fmt.Fprintln(o.streams.ErrOut, f)
			err = errors.New("a CompletionRule above is one the API server or wrapup's webhook refuses: fix it first (kubectl wrapup lint says more)")
		}
	}
	if err != nil {
		return failed("%v", err)
	}
	if !o.src.empty() && len(objs.rules) == 0 {
		return failed("no CompletionRule in %s", describeSources(o.src))
	}
	c, _, err := o.cluster()
	if err != nil {
		return failed("%v", err)
	}
	ns := ""
	if o.cf.Namespace != nil {
		ns = *o.cf.Namespace
	}
	sa := findServiceAccount(ctx, c, o.sa)
	if sa.note != "" {
		fmt.Fprintf(o.streams.ErrOut, "Note: %s\n", sa.note)
	}
	opts := view.ExplainOptions{Workers: workerReaders(c, o.workerFiles, secretsNamespace(o.workerSecrets, sa)), Access: sa.access(c)}
	p, err := planChange(ctx, c, opts, objs.rules, o.remove, ns, time.Now())
	if err != nil {
		return failed("%v", err)
	}
	if o.output != "" {
		return printObject(o.streams.Out, o.output, &unstructured.Unstructured{Object: p.object(o.all)})
	}
	p.print(o.streams.Out, o.all)
	return nil
}

// withRules reads through the client, but lists its rules as the
// CompletionRules: the cluster as it would be after a rule change.
type withRules struct {
	client.Client
	rules []wrapupv1alpha1.CompletionRule
}

func (w withRules) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if rl, ok := list.(*wrapupv1alpha1.CompletionRuleList); ok {
		rl.Items = nil
		for i := range w.rules {
			rl.Items = append(rl.Items, *w.rules[i].DeepCopy())
		}
		return nil
	}
	return w.Client.List(ctx, list, opts...)
}

// changedRules are the cluster's rules live once applied (each replaces
// the live rule of its name, or is added) and remove are deleted, as the
// controller would see them at now: a changed spec is a new generation.
func changedRules(live, applied []wrapupv1alpha1.CompletionRule, remove []string, now time.Time) ([]wrapupv1alpha1.CompletionRule, error) {
	out := slices.Clone(live)
	remove = slices.Compact(slices.Sorted(slices.Values(remove)))
	for _, name := range remove {
		i := slices.IndexFunc(out, func(r wrapupv1alpha1.CompletionRule) bool { return r.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("--delete %s: the cluster has no CompletionRule of that name", name)
		}
		out = slices.Delete(out, i, i+1)
	}
	for _, a := range applied {
		if slices.Contains(remove, a.Name) {
			return nil, fmt.Errorf("rule %s is both applied and deleted", a.Name)
		}
		n := a.DeepCopy()
		i := slices.IndexFunc(out, func(r wrapupv1alpha1.CompletionRule) bool { return r.Name == a.Name })
		if i >= 0 {
			old := &out[i]
			if equality.Semantic.DeepEqual(defaulted(old.Spec), defaulted(n.Spec)) {
				continue
			}
			n.ObjectMeta = *old.ObjectMeta.DeepCopy()
			n.Labels, n.Annotations = a.Labels, a.Annotations
			n.Generation = old.Generation + 1
			n.Status = *old.Status.DeepCopy()
		} else {
			// Created: the API server keeps no status a file gives.
			n.Generation = 1
			n.CreationTimestamp = metav1.NewTime(now)
			n.Status = wrapupv1alpha1.CompletionRuleStatus{}
		}
		if i >= 0 {
			out[i] = *n
		} else {
			out = append(out, *n)
		}
	}
	return out, nil
}

// defaulted is spec with the defaults the API server fills in that a file
// may leave out (an action "" is DeleteAll), so that a file the same as
// the live rule but for them is no change.
func defaulted(spec wrapupv1alpha1.CompletionRuleSpec) wrapupv1alpha1.CompletionRuleSpec {
	for _, a := range []*wrapupv1alpha1.ActionSpec{&spec.OnSuccess, &spec.OnFailure} {
		if a.Action == "" {
			a.Action = wrapupv1alpha1.ActionDeleteAll
		}
	}
	return spec
}

// planned is what wrapup decides for one AppWrapper now and after.
type planned struct {
	AppWrapper  string
	Now, After  *view.Explanation
	Err         string
	changed     bool
	deleted     bool
	deletesNow  bool
	blocksAfter bool
}

// plan is a rule change's effect on the live AppWrappers.
type plan struct {
	Rules []string
	Items []planned
}

// planChange decides for each AppWrapper of ns ("": every namespace) under
// the cluster's rules and under them after the change.
func planChange(ctx context.Context, c client.Client, opts view.ExplainOptions, applied []wrapupv1alpha1.CompletionRule, remove []string, ns string, now time.Time) (*plan, error) {
	var live wrapupv1alpha1.CompletionRuleList
	if err := c.List(ctx, &live); err != nil {
		return nil, fmt.Errorf("listing CompletionRules: %w", err)
	}
	after, err := changedRules(live.Items, applied, remove, now)
	if err != nil {
		return nil, err
	}
	var aws awv1beta2.AppWrapperList
	if err := c.List(ctx, &aws, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing AppWrappers: %w", err)
	}
	p := &plan{}
	for _, r := range applied {
		p.Rules = append(p.Rules, r.Name)
	}
	for _, r := range remove {
		p.Rules = append(p.Rules, "-"+r)
	}
	for i := range aws.Items {
		key := client.ObjectKeyFromObject(&aws.Items[i])
		it := planned{AppWrapper: key.String()}
		var err error
		if it.Now, err = view.ExplainWith(ctx, c, opts, nil, key, now); err == nil {
			it.After, err = view.ExplainWith(ctx, withRules{Client: c, rules: after}, opts, nil, key, now)
		}
		if err != nil {
			it.Err = err.Error()
			it.changed = true
		} else {
			// A deletion that comes sooner (a shorter TTL) is one the
			// change makes; one that comes later, a change all the same.
			sooner := deletes(it.After) && (!deletes(it.Now) || dueAt(it.After).Before(dueAt(it.Now).Add(-time.Second)))
			it.changed = it.Now.Winner != it.After.Winner || it.Now.Verdict != it.After.Verdict ||
				deletes(it.Now) && deletes(it.After) && dueAt(it.Now).Sub(dueAt(it.After)).Abs() > time.Second
			it.deleted = sooner
			it.deletesNow = it.deleted && (it.After.Verdict == decision.VerdictDelete || it.After.After <= time.Second)
			it.blocksAfter = it.After.Verdict == decision.VerdictBlocked && it.Now.Verdict != decision.VerdictBlocked
		}
		p.Items = append(p.Items, it)
	}
	return p, nil
}

// deletes says whether ex deletes the AppWrapper: now, or at a time set.
// (A TTL counted from a rule change is due at it when it is 0: at once.)
func deletes(ex *view.Explanation) bool {
	return ex.Verdict == decision.VerdictDelete || ex.Verdict == decision.VerdictDeleteAfterTTL
}

// dueAt is when ex deletes the AppWrapper (now, for a deletion at once).
func dueAt(ex *view.Explanation) time.Time {
	if ex.Verdict == decision.VerdictDelete || ex.DueAt.IsZero() {
		return ex.At
	}
	return ex.DueAt
}

// note says in a few words what the change does to it.
func (it *planned) note() string {
	switch {
	case it.Err != "":
		return "cannot be read: " + it.Err
	case it.deletesNow:
		return "deleted at once: " + it.After.Reason
	case it.deleted:
		return fmt.Sprintf("deleted in %s: %s", it.After.After.Round(time.Second), it.After.Reason)
	case it.changed && deletes(it.Now) && deletes(it.After):
		return fmt.Sprintf("deleted later, in %s rather than %s: %s", it.After.After.Round(time.Second), dueAt(it.Now).Sub(it.Now.At).Round(time.Second), it.After.Reason)
	case it.blocksAfter:
		return "blocked: " + it.After.Reason
	case it.changed:
		return it.After.Reason
	}
	return ""
}

func (p *plan) print(w io.Writer, all bool) {
	var changed, deleted, deletesNow, blocks int
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "APPWRAPPER\tRULE NOW\tVERDICT NOW\tRULE AFTER\tVERDICT AFTER\tWHY")
	for i := range p.Items {
		it := &p.Items[i]
		if it.changed {
			changed++
		}
		if it.deleted {
			deleted++
		}
		if it.deletesNow {
			deletesNow++
		}
		if it.blocksAfter {
			blocks++
		}
		if !it.changed && !all {
			continue
		}
		if it.Err != "" {
			fmt.Fprintf(tw, "%s\t-\t-\t-\t-\t%s\n", it.AppWrapper, decision.Truncate(it.note(), 160))
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", it.AppWrapper, orNone(it.Now.Winner), it.Now.Verdict,
			orNone(it.After.Winner), it.After.Verdict, decision.Truncate(it.note(), 160))
	}
	_ = tw.Flush()
	// What the decisions could not see as the controller does.
	var notes []string
	for i := range p.Items {
		for _, ex := range []*view.Explanation{p.Items[i].Now, p.Items[i].After} {
			if ex == nil {
				continue
			}
			for _, n := range ex.Notes {
				if !slices.Contains(notes, n) {
					notes = append(notes, n)
				}
			}
		}
	}
	for _, n := range notes {
		fmt.Fprintf(w, "Note: %s\n", n)
	}
	fmt.Fprintf(w, "\n%s: %d change, %d deleted (%d at once), %d blocked (rules %s)\n",
		plural(len(p.Items), "AppWrapper"), changed, deleted, deletesNow, blocks, strings.Join(p.Rules, ", "))
}

// object is the plan as -o json|yaml prints it.
func (p *plan) object(all bool) map[string]any {
	var items []any
	for i := range p.Items {
		it := &p.Items[i]
		if !it.changed && !all {
			continue
		}
		m := map[string]any{"appWrapper": it.AppWrapper, "changed": it.changed, "deleted": it.deleted, "deletedAtOnce": it.deletesNow, "blocked": it.blocksAfter}
		if it.Err != "" {
			m["error"] = it.Err
		} else {
			for k, ex := range map[string]*view.Explanation{"now": it.Now, "after": it.After} {
				u, err := explanationObject(ex)
				if err == nil {
					m[k] = u.Object
				}
			}
		}
		items = append(items, m)
	}
	rules := make([]any, len(p.Rules))
	for i, r := range p.Rules {
		rules[i] = r
	}
	return runtime.DeepCopyJSON(map[string]any{"apiVersion": wrapupv1alpha1.GroupVersion.String(), "kind": "Plan",
		"rules": rules, "items": items})
}
