package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

const lintLong = `Check CompletionRules before they are applied, as the API server and the
controller check them:

  - the CRD's validation, with the API server's own validators over the
    generated CRD: unknown fields, types, enums, bounds, patterns and the
    x-kubernetes-validations rules (errors: the API server rejects the rule);
  - the expressions compiled as the controller compiles them (errors: the
    rule is not Ready and acts on nothing);
  - the expressions type-checked against the trigger kind's schema, with the
    estimated worst-case cost, as the controller does and reports on the
    rule's status.typeChecking (warnings). Offline, the schemas of batch/v1
    Job, v1 Pod, JobSet, the Kubeflow training kinds (PyTorchJob, TFJob,
    XGBoostJob, JAXJob, PaddleJob, MPIJob v2beta1, TrainJob) and RayJob ship
    with the plugin, as the API server publishes them;
    --server-schema checks against the cluster's published schema instead;
  - selectors parsed as the controller parses them, the name as the API
    server validates a custom resource's, and the trigger kind against its
    group (a core-group kind that is not one, "Job is in batch"): errors,
    as the admission webhook refuses them; a near miss of a built-in kind
    (PytorchJob) is a warning, or an error when it can never be served; a
    kind of the same name in another group (Volcano's batch.volcano.sh Job)
    is no mistake where the group has it (a shipped schema, or the cluster
    serves it with --server-schema);
  - for built-in kinds, comparisons with a condition type or a state the
    kind never has, and success or failure on a state its controller moves
    on from (Restarting, Suspended, Aborted, ...): warnings;
  - parts of a rule that can never take effect (warnings), and two rules of
    the same priority over the same AppWrappers that act differently (a
    warning naming the one that wins, by name);
  - in AppWrappers, a wrapup.dev/trigger that wrapup does not read (on the
    AppWrapper's own metadata: a warning, as the controller's
    TriggerAnnotationMisplaced Event).

Each finding is one line naming the file, line and column of the field,
and for CEL the line and column inside the expression. Documents of other
kinds are skipped; finding no CompletionRule nor AppWrapper at all is an
error unless --allow-no-rules. --strict makes warnings fail too.`

// lintOptions are lint's flags: kubectl's Validate, Run.
type lintOptions struct {
	src                              sources
	serverSchema, allowEmpty, strict bool
	output                           string

	cf      *genericclioptions.ConfigFlags
	streams genericiooptions.IOStreams
}

func newLintOptions(cf *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *lintOptions {
	return &lintOptions{cf: cf, streams: streams}
}

func newLintCommand(cf *genericclioptions.ConfigFlags, streams genericiooptions.IOStreams) *cobra.Command {
	o := newLintOptions(cf, streams)
	cmd := &cobra.Command{
		Use:   "lint (-f FILENAME | -k DIR)...",
		Short: "Check CompletionRules as the API server and the controller check them",
		Long:  lintLong,
		Example: examples(
			"# Check the rules of a folder, and of one more file",
			"kubectl wrapup lint -f rules/ -f extra-rule.yaml",
			"",
			"# Check what a kustomization renders",
			"kubectl wrapup lint -k config/rules",
			"",
			"# Check a rule on stdin, type-checked against the cluster's schemas",
			"cat rule.yaml | kubectl wrapup lint -f - --server-schema",
		),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	addSourceFlags(cmd, &o.src, "CompletionRules")
	cmd.Flags().BoolVar(&o.serverSchema, "server-schema", false, "Type-check against the trigger kinds' schemas that the cluster publishes (/openapi/v3), as the controller does, instead of the shipped ones.")
	cmd.Flags().BoolVar(&o.allowEmpty, "allow-no-rules", false, "Succeed when the input holds no CompletionRule.")
	cmd.Flags().BoolVar(&o.strict, "strict", false, "Fail (exit 1) on warnings too, for CI.")
	addOutputFlag(cmd, &o.output, "Output format: json or yaml (default: one line per finding, as compilers print them).", "json", "yaml")
	return cmd
}

// Validate checks that files are given, stdin read once, and the output
// format.
func (o *lintOptions) Validate() error {
	if o.src.empty() {
		return errors.New("lint needs -f FILENAME or -k DIR")
	}
	if stdinUses(o.src.Filenames) > 1 {
		return errors.New("stdin (-f -) can be read once")
	}
	return checkOutput(o.output, "json", "yaml")
}

// Run lints the documents of the files and prints the findings: exit 1
// on an error, or on a warning with --strict.
func (o *lintOptions) Run(ctx context.Context) error {
	docs, files, err := o.src.read(o.streams.In)
	if err != nil {
		return failed("%v", err)
	}
	schemas := offlineSchemas()
	if o.serverSchema {
		if schemas, err = serverSchemas(o.cf); err != nil {
			return failed("%v", err)
		}
	}
	findings, rules, aws := lintAll(ctx, docs, schemas)
	if rules == 0 && aws == 0 && !o.allowEmpty {
		findings = append(findings, finding{At: describeSources(o.src), Severity: sevError,
			Message: fmt.Sprintf("no CompletionRule found in %d document(s) (--allow-no-rules accepts that)", len(docs))})
	}
	if o.output != "" {
		res := lintObject(findings, rules, files)
		if err := printObject(o.streams.Out, o.output, &unstructured.Unstructured{Object: res}); err != nil {
			return failed("%v", err)
		}
		if res["errors"].(int64) > 0 || o.strict && res["warnings"].(int64) > 0 {
			return quietly(exitFail)
		}
		return nil
	}
	if errs, warns := printLint(o.streams.Out, findings, rules, files); errs > 0 || o.strict && warns > 0 {
		return quietly(exitFail)
	}
	return nil
}

func describeSources(src sources) string {
	all := append(append([]string{}, src.Filenames...), src.Kustomize...)
	if len(all) == 1 {
		return all[0]
	}
	return fmt.Sprintf("%v", all)
}

// serverSchemas type-checks against the cluster's published schemas, at
// the version its REST mapper prefers, as the controller does.
func serverSchemas(cf *genericclioptions.ConfigFlags) (lintSchemas, error) {
	dc, err := cf.ToDiscoveryClient()
	if err != nil {
		return lintSchemas{}, fmt.Errorf("connecting to the cluster: %w", err)
	}
	mapper, err := cf.ToRESTMapper()
	if err != nil {
		return lintSchemas{}, fmt.Errorf("connecting to the cluster: %w", err)
	}
	r := &resolver.ClientDiscoveryResolver{Discovery: dc}
	return lintSchemas{where: "cluster", schemaFor: func(gk schema.GroupKind) (schema.GroupVersionKind, *spec.Schema, string, bool) {
		m, err := mapper.RESTMapping(gk)
		if err != nil {
			return schema.GroupVersionKind{}, nil, fmt.Sprintf("the cluster does not serve %s: its expressions are not type-checked (%v)", kindName(gk), err), false
		}
		s, err := r.ResolveSchema(m.GroupVersionKind)
		if err != nil {
			return m.GroupVersionKind, nil, fmt.Sprintf("the cluster publishes no schema of %s: its expressions are not type-checked (%v)", m.GroupVersionKind, err), false
		}
		return m.GroupVersionKind, s, "", true
	}}, nil
}
