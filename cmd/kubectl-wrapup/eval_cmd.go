package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/cmd/kubectl-wrapup/view"
	"github.com/wrapup-dev/wrapup/gc/decision"
)

const evalLong = `Evaluate a CompletionRule against a trigger object, as the controller does:
the outcome, the message, the CEL cost, which expressions were built-in, and
what the rule does then. Nothing is written.

The rule comes from a file (-f) or from the cluster (--rule NAME). The
trigger comes from a file (--trigger; its kind from its apiVersion and
kind), or from the cluster: --appwrapper [NAMESPACE/]NAME reads the
AppWrapper, finds its trigger as the controller finds it, and reads it.
--appwrapper with a file (*.yaml, *.yml, *.json, or -) gives the appWrapper
variable of the expressions instead.

With --appwrapper, "then" is what the controller decides for that AppWrapper
under this rule alone (its decision code, as explain runs it: an AppWrapper
it ignores, one the rule does not select, or one not running yet is not
finished whatever the trigger says); without it, the rule's action.`

// evalOptions are eval's flags, and what Complete makes of them: kubectl's
// Complete, Validate, Run.
type evalOptions struct {
	src                                             sources
	name, ruleName, triggerFile, appWrapper, output string

	// awFile: --appwrapper names a file, which gives the appWrapper
	// variable rather than the trigger.
	awFile bool

	cf      *genericclioptions.ConfigFlags
	cluster clientGetter
	streams genericiooptions.IOStreams
}

func newEvalOptions(cf *genericclioptions.ConfigFlags, cluster clientGetter, streams genericiooptions.IOStreams) *evalOptions {
	return &evalOptions{cf: cf, cluster: cluster, streams: streams}
}

func newEvalCommand(cf *genericclioptions.ConfigFlags, cluster clientGetter, streams genericiooptions.IOStreams) *cobra.Command {
	o := newEvalOptions(cf, cluster, streams)
	cmd := &cobra.Command{
		Use:   "eval (-f RULE.yaml | --rule NAME) (--trigger OBJECT.yaml | --appwrapper [NAMESPACE/]NAME)",
		Short: "Evaluate a rule against a trigger object, offline or from the cluster",
		Long:  evalLong,
		Example: examples(
			"# A rule file against a Job saved with kubectl get job NAME -o yaml",
			"kubectl wrapup eval -f rules/benchmarks.yaml --trigger job.yaml",
			"",
			"# The cluster's rule against the live trigger of a running AppWrapper (read-only)",
			"kubectl wrapup eval --rule benchmarks --appwrapper team-a/llama-sweep",
			"",
			"# An edited rule against the live trigger, as JSON",
			"kubectl wrapup eval -f edited.yaml --appwrapper llama-sweep -n team-a -o json",
		),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Complete(args)
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	addSourceFlags(cmd, &o.src, "CompletionRules")
	cmd.Flags().StringVar(&o.name, "name", "", "The rule to evaluate, when the files hold several.")
	cmd.Flags().StringVar(&o.ruleName, "rule", "", "Read the CompletionRule of this name from the cluster.")
	cmd.Flags().StringVar(&o.triggerFile, "trigger", "", "File with the trigger object, status included (e.g. kubectl get job NAME -o yaml); - reads stdin.")
	cmd.Flags().StringVar(&o.appWrapper, "appwrapper", "", "[NAMESPACE/]NAME of a live AppWrapper whose trigger to read from the cluster; or a file with the AppWrapper for the appWrapper variable.")
	addOutputFlag(cmd, &o.output, "Output format: json or yaml (default: for people).", "json", "yaml")
	_ = cmd.MarkFlagFilename("trigger", "yaml", "yml", "json")
	_ = cmd.RegisterFlagCompletionFunc("appwrapper", completeAppWrappers(cluster))
	_ = cmd.RegisterFlagCompletionFunc("rule", completeRules(cluster))
	return cmd
}

// Complete says whether --appwrapper names a file (eval takes no
// arguments).
func (o *evalOptions) Complete(_ []string) {
	o.awFile = isFileArg(o.appWrapper)
}

// Validate checks that the rule and the trigger are each given once, and
// the flags.
func (o *evalOptions) Validate() error {
	switch {
	case o.src.empty() == (o.ruleName == ""):
		return errors.New("eval needs the rule: -f RULE.yaml or --rule NAME (one of them)")
	case o.triggerFile == "" && (o.appWrapper == "" || o.awFile):
		return errors.New("eval needs the trigger: --trigger OBJECT.yaml, or --appwrapper [NAMESPACE/]NAME to read it from the cluster")
	case o.triggerFile != "" && o.appWrapper != "" && !o.awFile:
		return errors.New("--trigger and a live --appwrapper both give the trigger: choose one")
	case checkOutput(o.output, "json", "yaml") != nil:
		return checkOutput(o.output, "json", "yaml")
	case stdinUses(o.src.Filenames, o.triggerFile, o.appWrapper) > 1:
		return errors.New("stdin (-) can give only one of -f, --trigger and --appwrapper")
	case o.appWrapper != "" && !o.awFile && strings.Count(o.appWrapper, "/") > 1:
		return fmt.Errorf("--appwrapper %q: want NAME or NAMESPACE/NAME", o.appWrapper)
	}
	return nil
}

// Run reads the rule and the trigger, from the files or the cluster,
// evaluates the rule, and prints the reports; an evaluation that fails
// exits 1.
func (o *evalOptions) Run(ctx context.Context) error {
	var c client.Client
	var ns string
	if o.ruleName != "" || (o.appWrapper != "" && !o.awFile) {
		var err error
		if c, ns, err = o.cluster(); err != nil {
			return failed("%v", err)
		}
	}
	rule, where, err := evalRule(ctx, c, o.src, o.ruleName, o.name, o.streams)
	if err != nil {
		return err
	}
	var reports []*evalReport
	if o.triggerFile != "" {
		rep, err := o.evalFiles(ctx, rule, where)
		if err != nil {
			return err
		}
		reports = append(reports, rep)
	} else if reports, err = o.evalCluster(ctx, c, rule, where, namespacedName(o.appWrapper, ns)); err != nil {
		return err
	}
	return o.print(reports)
}

// evalFiles evaluates rule on the trigger of --trigger, with the
// AppWrapper of an --appwrapper file as the appWrapper variable, and then
// what the controller decides on that AppWrapper.
func (o *evalOptions) evalFiles(ctx context.Context, rule *wrapupv1alpha1.CompletionRule, where string) (*evalReport, error) {
	trigger, gvk, err := loadObject(o.triggerFile, o.streams.In)
	if err != nil {
		return nil, failed("%v", err)
	}
	var awVar map[string]any
	if o.awFile {
		var awGVK schema.GroupVersionKind
		if awVar, awGVK, err = loadObject(o.appWrapper, o.streams.In); err != nil {
			return nil, failed("%v", err)
		}
		if awGVK.Kind != "AppWrapper" {
			return nil, failed("%s holds a %s, not an AppWrapper", o.appWrapper, awGVK.Kind)
		}
	}
	rep, err := evaluate(ctx, rule, trigger, gvk, awVar)
	if err != nil {
		printCompileError(o.streams.ErrOut, where, rule.Name, err)
		return nil, quietly(exitFail)
	}
	if o.awFile {
		// What the controller decides on this AppWrapper with this
		// trigger, under this rule alone.
		ex, err := explainFiles(ctx, rule, awVar, o.appWrapper, trigger, o.triggerFile, namespaceOf(o.cf))
		if err != nil {
			return nil, failed("%v", err)
		}
		rep.Verdict, rep.Reason = ex.Verdict, ex.Reason
	}
	return rep, nil
}

// evalCluster evaluates rule on the live trigger (or candidates) of the
// AppWrapper key, and then what the controller decides on it.
func (o *evalOptions) evalCluster(ctx context.Context, c client.Client, rule *wrapupv1alpha1.CompletionRule, where string, key types.NamespacedName) ([]*evalReport, error) {
	reports, err := evalLive(ctx, c, rule, key)
	if err != nil {
		var f *failure
		if errors.As(err, &f) {
			return nil, err
		}
		printCompileError(o.streams.ErrOut, where, rule.Name, err)
		return nil, quietly(exitFail)
	}
	// What the controller decides on it, under this rule alone.
	ex, err := view.ExplainWithWorkers(ctx, withRules{Client: c, rules: []wrapupv1alpha1.CompletionRule{*rule}}, nil, nil, key, time.Now())
	if err != nil {
		return nil, failed("%v", err)
	}
	for _, rep := range reports {
		rep.Verdict, rep.Reason = ex.Verdict, ex.Reason
	}
	return reports, nil
}

// print prints the reports, and says on stderr which evaluations failed
// (exit 1).
func (o *evalOptions) print(reports []*evalReport) error {
	failedEval := false
	for i, rep := range reports {
		switch o.output {
		case "json", "yaml":
			if err := printObject(o.streams.Out, o.output, &unstructured.Unstructured{Object: rep.output()}); err != nil {
				return failed("%v", err)
			}
		default:
			if i > 0 {
				fmt.Fprintln(o.streams.Out)
			}
			rep.print(o.streams.Out)
		}
		if rep.Err != nil {
			fmt.Fprintf(o.streams.ErrOut, "error: %s: %v (the controller takes the trigger as not finished)\n", rep.Name, rep.Err)
			failedEval = true
		}
	}
	if failedEval {
		return quietly(exitFail)
	}
	return nil
}

// completeRules completes a CompletionRule name: the cluster's rules that
// begin with what was typed.
func completeRules(cluster clientGetter) cobra.CompletionFunc {
	return func(cmd *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		// A cluster that cannot be read completes nothing.
		c, _, err := cluster()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var list wrapupv1alpha1.CompletionRuleList
		if err := c.List(cmd.Context(), &list); err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return withPrefix(list.Items, func(r wrapupv1alpha1.CompletionRule) string { return r.Name }, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// stdinUses counts the arguments that read stdin.
func stdinUses(filenames []string, more ...string) int {
	n := 0
	for _, f := range append(append([]string{}, filenames...), more...) {
		if f == "-" {
			n++
		}
	}
	return n
}

// isFileArg says whether an --appwrapper value names a file.
func isFileArg(v string) bool {
	return v == "-" || manifestFile(v)
}

// namespacedName reads [NAMESPACE/]NAME, in ns by default.
func namespacedName(v, ns string) types.NamespacedName {
	if i := strings.IndexByte(v, '/'); i >= 0 {
		return types.NamespacedName{Namespace: v[:i], Name: v[i+1:]}
	}
	return types.NamespacedName{Namespace: ns, Name: v}
}

// evalRule reads the rule to evaluate: from the cluster, or from the
// sources; where names where it came from, for messages.
func evalRule(ctx context.Context, c client.Client, src sources, ruleName, name string, streams genericiooptions.IOStreams) (*wrapupv1alpha1.CompletionRule, string, error) {
	if ruleName != "" {
		rule := &wrapupv1alpha1.CompletionRule{}
		if err := c.Get(ctx, types.NamespacedName{Name: ruleName}, rule); err != nil {
			return nil, "", failed("reading CompletionRule %s: %v", ruleName, err)
		}
		return rule, "completionrule/" + ruleName, nil
	}
	rules, docs, err := loadRules(src, streams.In)
	if err != nil {
		return nil, "", failed("%v", err)
	}
	rule, doc, err := pickRule(rules, docs, name)
	if err != nil {
		return nil, "", failed("%s: %v", describeSources(src), err)
	}
	// A rule the API server rejects is never the controller's: say why.
	rs, err := loadRuleSchema()
	if err != nil {
		return nil, "", failed("%v", err)
	}
	tm, _ := typeOf(doc)
	if fs, _ := lintDocument(ctx, rs, doc, tm, lintSchemas{}); len(fs) > 0 {
		fs = doc.placeExpressions("", fs)
		bad := false
		for _, f := range fs {
			if f.Severity == sevError {
				fmt.Fprintln(streams.ErrOut, f)
				bad = true
			}
		}
		if bad {
			return nil, "", quietly(exitFail)
		}
	}
	return rule, doc.Where(), nil
}

// evalLive reads the AppWrapper key and the trigger (or candidates) rule
// takes in it, as the controller finds them, and evaluates rule on each.
func evalLive(ctx context.Context, c client.Client, rule *wrapupv1alpha1.CompletionRule, key types.NamespacedName) ([]*evalReport, error) {
	aw := &awv1beta2.AppWrapper{}
	if err := c.Get(ctx, key, aw); err != nil {
		return nil, failed("reading appwrapper %s: %w", key, err)
	}
	awVar, err := runtime.DefaultUnstructuredConverter.ToUnstructured(aw)
	if err != nil {
		return nil, failed("%v", err)
	}
	awVar["apiVersion"], awVar["kind"] = awv1beta2.GroupVersion.String(), "AppWrapper"
	refs, nt := decision.FindTriggers(aw, rule)
	if nt != nil {
		return nil, failed("appwrapper %s: %s", key, nt.Message)
	}
	var reports []*evalReport
	for _, ref := range refs {
		gvk := ref.Kind.WithVersion(ref.Version)
		if ref.Name == "" {
			reports = append(reports, &evalReport{Rule: rule, Trigger: gvk, Name: ref.Template,
				Note: "the AppWrapper controller has not created this component yet (its template uses generateName): nothing to evaluate", Result: celpolicies.Result{Outcome: celpolicies.OutcomeRunning}})
			continue
		}
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if err := c.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: ref.Name}, u); err != nil {
			return nil, failed("reading the trigger %s %s/%s: %w", gvk.Kind, key.Namespace, ref.Name, err)
		}
		rep, err := evaluate(ctx, rule, u.Object, gvk, awVar)
		if err != nil {
			return nil, err
		}
		if _, ok := decision.MultiKueueWorkerCopy(aw); ok {
			rep.WorkerCopy = true
			rep.Note = fmt.Sprintf("AppWrapper %s is MultiKueue's copy on a worker cluster: wrapup records the outcome here and deletes nothing; the manager cluster's wrapup finishes the AppWrapper", key)
		}
		if !decision.OwnedBy(u, aw) {
			rep.Note = fmt.Sprintf("%s %s is not controlled by AppWrapper %s: the controller does not take it as the trigger", gvk.Kind, ref.Name, key)
		}
		reports = append(reports, rep)
	}
	return reports, nil
}
