package celpolicies

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/runtime/schema"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
)

// builtinSource is what "finished" means for a well-known kind, in CEL over
// the status that its operator writes. Every expression uses ?. and orValue:
// a trigger whose status or conditions are not written yet is Running, not
// an error.
type builtinSource struct {
	success, failure string
	// successMessage and failureMessage describe the outcome. They are Go:
	// the same in CEL (filter, map, join) costs more than the decision
	// itself, and a description has no semantics a user would copy.
	successMessage, failureMessage func(object map[string]any) string
}

// conditionTrue is true once the object has condition t with status True.
// Only terminal condition types are passed in: transient ones (Suspended,
// Restarting, FailureTarget, SuccessCriteriaMet) must not finish anything.
func conditionTrue(t string) string {
	return fmt.Sprintf("object.?status.?conditions.orValue([]).exists(c, c.type == '%s' && c.status == 'True')", t)
}

// conditionMessage is "reason: message" of the True conditions of type t.
func conditionMessage(t string) func(map[string]any) string {
	return func(object map[string]any) string {
		status, _ := object["status"].(map[string]any)
		conds, _ := status["conditions"].([]any)
		var parts []string
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if typ, _ := m["type"].(string); typ != t {
				continue
			}
			if s, _ := m["status"].(string); s != "True" {
				continue
			}
			if msg := reasonMessage(m); msg != "" {
				parts = append(parts, msg)
			}
		}
		return strings.Join(parts, "; ")
	}
}

// statusMessage is "reason: message" from status.reason and status.message,
// for kinds that report a phase rather than conditions.
func statusMessage(object map[string]any) string {
	status, _ := object["status"].(map[string]any)
	return reasonMessage(status)
}

// reasonMessage joins the reason and message fields of m that are set.
func reasonMessage(m map[string]any) string {
	reason, _ := m["reason"].(string)
	message, _ := m["message"].(string)
	switch {
	case reason == "":
		return message
	case message == "":
		return reason
	}
	return reason + ": " + message
}

// conditionKind is a kind whose operator reports completion as conditions.
func conditionKind(succeeded, failed string) builtinSource {
	return builtinSource{
		success:        conditionTrue(succeeded),
		failure:        conditionTrue(failed),
		successMessage: conditionMessage(succeeded),
		failureMessage: conditionMessage(failed),
	}
}

// builtinSources must list the same kinds as the x-kubernetes-validations
// rule on CompletionRuleSpec, which lets a rule omit spec.success only for
// these; a test keeps the two in step.
var builtinSources = map[schema.GroupKind]builtinSource{
	// The Job controller adds Complete after SuccessCriteriaMet and Failed
	// after FailureTarget, once the pods are gone; Suspended is not final.
	{Group: "batch", Kind: "Job"}:              conditionKind("Complete", "Failed"),
	{Group: "jobset.x-k8s.io", Kind: "JobSet"}: conditionKind("Completed", "Failed"),
	// The training operator (v1) and the MPI operator (v2beta1) write the
	// same condition types; Restarting is not final.
	// (training-operator v1.9.3 pkg/apis/kubeflow.org/v1/common_types.go,
	// JobConditionType, for every v1 kind Kueue also admits: PyTorchJob,
	// TFJob, XGBoostJob, JAXJob, PaddleJob.)
	{Group: "kubeflow.org", Kind: "PyTorchJob"}:       conditionKind("Succeeded", "Failed"),
	{Group: "kubeflow.org", Kind: "TFJob"}:            conditionKind("Succeeded", "Failed"),
	{Group: "kubeflow.org", Kind: "XGBoostJob"}:       conditionKind("Succeeded", "Failed"),
	{Group: "kubeflow.org", Kind: "JAXJob"}:           conditionKind("Succeeded", "Failed"),
	{Group: "kubeflow.org", Kind: "PaddleJob"}:        conditionKind("Succeeded", "Failed"),
	{Group: "kubeflow.org", Kind: "MPIJob"}:           conditionKind("Succeeded", "Failed"),
	{Group: "trainer.kubeflow.org", Kind: "TrainJob"}: conditionKind("Complete", "Failed"),
	// KubeRay sets jobDeploymentStatus Complete once the Ray job is
	// terminal (SUCCEEDED or STOPPED) and Failed once it FAILED or the
	// submission failed; releases before 1.3 reported a FAILED job as
	// Complete. Retrying (backoffLimit) and ValidationFailed are not final
	// for KubeRay (IsJobDeploymentTerminal), so not here either.
	{Group: "ray.io", Kind: "RayJob"}: {
		success: "object.?status.?jobDeploymentStatus.orValue('') == 'Complete' && " +
			"object.?status.?jobStatus.orValue('') == 'SUCCEEDED'",
		failure: "object.?status.?jobDeploymentStatus.orValue('') == 'Failed' || " +
			"(object.?status.?jobDeploymentStatus.orValue('') == 'Complete' && " +
			"object.?status.?jobStatus.orValue('') in ['FAILED', 'STOPPED'])",
		successMessage: statusMessage,
		failureMessage: statusMessage,
	},
	{Group: "", Kind: "Pod"}: {
		success:        "object.?status.?phase.orValue('') == 'Succeeded'",
		failure:        "object.?status.?phase.orValue('') == 'Failed'",
		successMessage: statusMessage,
		failureMessage: statusMessage,
	},
	// Error is Argo's phase for a workflow that could not run its steps.
	// Argo writes no status.reason.
	{Group: "argoproj.io", Kind: "Workflow"}: {
		success:        "object.?status.?phase.orValue('') == 'Succeeded'",
		failure:        "object.?status.?phase.orValue('') in ['Failed', 'Error']",
		successMessage: statusMessage,
		failureMessage: statusMessage,
	},
}

// BuiltinFor returns the built-in success and failure expressions for a
// kind, for documentation and for the rule's status.
func BuiltinFor(gk schema.GroupKind) (success, failure string, ok bool) {
	b, ok := builtinSources[gk]
	return b.success, b.failure, ok
}

// BuiltinKinds returns the kinds with built-in expressions, sorted by group
// then kind.
func BuiltinKinds() []schema.GroupKind {
	kinds := make([]schema.GroupKind, 0, len(builtinSources))
	for gk := range builtinSources {
		kinds = append(kinds, gk)
	}
	sort.Slice(kinds, func(i, j int) bool {
		if kinds[i].Group != kinds[j].Group {
			return kinds[i].Group < kinds[j].Group
		}
		return kinds[i].Kind < kinds[j].Kind
	})
	return kinds
}

// kindKey spells a kind as the CompletionRule validation rule does,
// "group/Kind" with an empty group for the core API.
func kindKey(gk schema.GroupKind) string {
	return gk.Group + "/" + gk.Kind
}

// compiledBuiltin holds the programs of one built-in kind.
type compiledBuiltin struct {
	success, failure               *program
	successMessage, failureMessage func(map[string]any) string
}

var (
	builtinsOnce sync.Once
	builtins     map[schema.GroupKind]*compiledBuiltin
	builtinsErr  error
)

// compiledBuiltinFor returns the built-in programs for gk, or nil if the kind
// has none. They are compiled once per process, on first use, and shared
// by every Policy.
func compiledBuiltinFor(gk schema.GroupKind) (*compiledBuiltin, error) {
	builtinsOnce.Do(func() { builtins, builtinsErr = compileBuiltins() })
	if builtinsErr != nil {
		return nil, builtinsErr
	}
	return builtins[gk], nil
}

// compileBuiltins compiles the built-ins in an environment of their own,
// without the cost tracking of the Kubernetes environment. They are fixed
// expressions whose work is linear in the object's conditions; cost tracking
// would triple their time on every reconcile of every running trigger, and
// its bookkeeping grows quadratically with a long list. They stay
// interruptible by the context. A test checks that each compiles to the
// same type in the rule environment, so a user can copy one into a rule.
func compileBuiltins() (map[schema.GroupKind]*compiledBuiltin, error) {
	env, err := cel.NewEnv(
		cel.Variable(ObjectVarName, cel.DynType),
		cel.HomogeneousAggregateLiterals(),
		cel.OptionalTypes(),
		cel.EagerlyValidateDeclarations(true),
	)
	if err != nil {
		return nil, fmt.Errorf("building the built-in CEL environment: %w", err)
	}
	var errs []FieldError
	compile := func(field, expr string) *program {
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			errs = append(errs, FieldError{Field: field, Expression: expr, Message: issuesMessage(iss)})
			return nil
		}
		if !ast.OutputType().IsExactType(cel.BoolType) {
			errs = append(errs, FieldError{Field: field, Expression: expr, Message: "must evaluate to bool but got " + ast.OutputType().String()})
			return nil
		}
		prog, err := env.Program(ast,
			cel.EvalOptions(cel.OptOptimize),
			cel.InterruptCheckFrequency(celconfig.CheckFrequency))
		if err != nil {
			errs = append(errs, FieldError{Field: field, Expression: expr, Message: err.Error()})
			return nil
		}
		r := readsOf(ast)
		// The messages, written in Go, read the status.
		r.object = r.object.with("status")
		return &program{field: field, prog: prog, builtin: true, reads: r}
	}
	out := make(map[schema.GroupKind]*compiledBuiltin, len(builtinSources))
	for gk, src := range builtinSources {
		out[gk] = &compiledBuiltin{
			success:        compile(fieldSuccess, src.success),
			failure:        compile(fieldFailure, src.failure),
			successMessage: src.successMessage,
			failureMessage: src.failureMessage,
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("built-in expressions: %w", &CompileError{Errors: errs})
	}
	return out, nil
}
