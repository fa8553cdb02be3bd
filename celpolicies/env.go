package celpolicies

import (
	"fmt"
	"sync"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types/traits"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/lazy"
)

// Names of the variables that every expression sees.
const (
	// ObjectVarName is the live trigger object, as unstructured content.
	ObjectVarName = "object"
	// AppWrapperVarName is the AppWrapper that holds the trigger.
	AppWrapperVarName = "appWrapper"
	// VariablesVarName holds the rule's variables, as variables.<name>.
	VariablesVarName = "variables"

	// variablesTypeName must not clash with the type names of the base
	// environment; ValidatingAdmissionPolicy uses "kubernetes.variables".
	variablesTypeName = "wrapup.variables"
)

// Limits, the API server's where it has one.
const (
	// MaxExpressionLength matches the MaxLength of the expression fields in
	// the CompletionRule schema. It is checked before parsing, so that an
	// oversized expression that bypassed admission costs nothing to reject.
	MaxExpressionLength = 4096

	// MaxNestingDepth bounds the parser's recursion. Hand-written completion
	// expressions nest a few levels; the bound is low enough that neither the
	// parser nor the checker can exhaust the stack.
	MaxNestingDepth = 100

	// MaxVariables matches the MaxItems of spec.variables.
	MaxVariables = 16

	// PerCallCostLimit is the cost limit of one expression evaluation, the
	// same as the API server's for a validation rule (about 0.1 s).
	PerCallCostLimit = celconfig.PerCallLimit

	// StaticCostLimit bounds the estimated worst-case cost of an
	// expression, where the trigger kind's schema bounds its inputs: the
	// API server's limit for a CRD validation rule.
	StaticCostLimit = 10_000_000 // apiextensions validation.StaticEstimatedCostLimit

	// EvaluationCostBudget bounds the summed cost of every expression and
	// variable evaluated for one trigger, as the API server's runtime budget
	// bounds the rules of one object. The size of each variable's string or
	// bytes value counts too, at the API server's traversal cost.
	EvaluationCostBudget = celconfig.RuntimeCELCostBudget

	// MaxMessageLength bounds an evaluated message, as the API server bounds
	// messageExpression results. Longer messages are truncated.
	MaxMessageLength = celconfig.MaxEvaluatedMessageExpressionSizeBytes
)

// baseEnvironment is shared by every compilation: extending a CEL environment
// is expensive, and rules without variables need nothing beyond it.
type baseEnvironment struct {
	envSet *environment.EnvSet
	// noVariables is the type of "variables" for a rule without variables,
	// and for the built-in expressions. It is never given fields.
	noVariables *apiservercel.DeclType
	// emptyVariables is the runtime value for noVariables; it has no fields,
	// so it is never written to and can be shared between goroutines.
	emptyVariables *lazy.MapValue
}

var (
	baseEnvOnce sync.Once
	baseEnv     *baseEnvironment
	baseEnvErr  error
)

// getBaseEnvironment builds the environment once per process.
func getBaseEnvironment() (*baseEnvironment, error) {
	baseEnvOnce.Do(func() {
		noVariables := apiservercel.NewObjectType(variablesTypeName, map[string]*apiservercel.DeclField{})
		envSet, err := extendWithVariables(noVariables)
		if err != nil {
			baseEnvErr = err
			return
		}
		baseEnv = &baseEnvironment{
			envSet:         envSet,
			noVariables:    noVariables,
			emptyVariables: lazy.NewMapValue(noVariables),
		}
	})
	return baseEnv, baseEnvErr
}

// extendWithVariables returns the Kubernetes base environment (the libraries
// of CRD validation rules and ValidatingAdmissionPolicy, with their cost
// limits) plus wrapup's variables, "variables" having the given type.
func extendWithVariables(variablesType *apiservercel.DeclType) (*environment.EnvSet, error) {
	base := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
	envSet, err := base.Extend(environment.VersionedOptions{
		// Part of wrapup from its first version, hence 1.0: the versions
		// only gate options for the NewExpressions environment.
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions: []cel.EnvOption{
			cel.Variable(ObjectVarName, cel.DynType),
			cel.Variable(AppWrapperVarName, cel.DynType),
			cel.Variable(VariablesVarName, variablesType.CelType()),
			cel.ParserRecursionLimit(MaxNestingDepth),
			cel.ParserExpressionSizeLimit(MaxExpressionLength),
		},
		DeclTypes: []*apiservercel.DeclType{variablesType},
	})
	if err != nil {
		return nil, fmt.Errorf("building the CEL environment: %w", err)
	}
	return envSet, nil
}

// celEnv picks the NewExpressions environment: it is pinned to the
// compatibility version, so a rule that uses a library only a newer wrapup
// knows is rejected now rather than breaking after a rollback, which is the
// guarantee the API server gives for the expressions it stores.
func celEnv(envSet *environment.EnvSet) *cel.Env {
	return envSet.NewExpressionsEnv()
}

// declTypeOf maps a checked CEL type to the declaration type that a later
// variable, or success/failure/message, sees for variables.<name>.
func declTypeOf(t *cel.Type) *apiservercel.DeclType {
	if t == nil {
		return apiservercel.DynType
	}
	switch {
	case t.IsExactType(cel.BoolType):
		return apiservercel.BoolType
	case t.IsExactType(cel.BytesType):
		return apiservercel.BytesType
	case t.IsExactType(cel.DoubleType):
		return apiservercel.DoubleType
	case t.IsExactType(cel.DurationType):
		return apiservercel.DurationType
	case t.IsExactType(cel.IntType):
		return apiservercel.IntType
	case t.IsExactType(cel.NullType):
		return apiservercel.NullType
	case t.IsExactType(cel.StringType):
		return apiservercel.StringType
	case t.IsExactType(cel.TimestampType):
		return apiservercel.TimestampType
	case t.IsExactType(cel.UintType):
		return apiservercel.UintType
	}
	if t.HasTrait(traits.ContainerType) && t.HasTrait(traits.IndexerType) {
		params := t.Parameters()
		switch len(params) {
		case 1:
			return apiservercel.NewListType(declTypeOf(params[0]), -1)
		case 2:
			return apiservercel.NewMapType(declTypeOf(params[0]), declTypeOf(params[1]), -1)
		}
	}
	// Optionals, type values and the like stay dyn: the checker then accepts
	// any use and the evaluator checks it.
	return apiservercel.DynType
}
