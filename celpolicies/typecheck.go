package celpolicies

import (
	"fmt"

	"github.com/google/cel-go/cel"
	"k8s.io/apimachinery/pkg/util/version"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/common"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/apiserver/pkg/cel/openapi"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/wrapup-dev/wrapup/api/v1alpha1"
)

// TypeCheck checks a rule's expressions against the trigger kind's schema,
// as the API server publishes it (OpenAPI v3, through discovery), the way
// the API server type-checks a ValidatingAdmissionPolicy: object is typed by
// the schema, so a misspelt field (object.status.succeded) or a wrong
// comparison is found before any trigger finishes. It returns a warning per
// expression that does not type-check; the rule itself is compiled and run
// with a dynamically typed object regardless, so warnings never stop it.
// A nil schema, or one that yields no type, checks nothing.
func TypeCheck(ruleSpec *v1alpha1.CompletionRuleSpec, objectSchema *spec.Schema, kind string) []v1alpha1.ExpressionWarning {
	if ruleSpec == nil || objectSchema == nil {
		return nil
	}
	objectType := common.SchemaDeclType(&openapi.Schema{Schema: objectSchema}, true)
	if objectType == nil {
		return nil
	}
	objectType = objectType.MaybeAssignTypeName("wrapup.trigger." + kind)
	variablesType := apiservercel.NewObjectType(variablesTypeName, map[string]*apiservercel.DeclField{})
	envSet, err := environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()).Extend(environment.VersionedOptions{
		IntroducedVersion: version.MajorMinor(1, 0),
		EnvOptions: []cel.EnvOption{
			cel.Variable(ObjectVarName, objectType.CelType()),
			cel.Variable(AppWrapperVarName, cel.DynType),
			cel.Variable(VariablesVarName, variablesType.CelType()),
			cel.ParserRecursionLimit(MaxNestingDepth),
			cel.ParserExpressionSizeLimit(MaxExpressionLength),
		},
		DeclTypes: []*apiservercel.DeclType{objectType, variablesType},
	})
	if err != nil {
		return []v1alpha1.ExpressionWarning{{FieldRef: "spec", Warning: fmt.Sprintf("building the type-checking environment: %v", err)}}
	}
	env := celEnv(envSet)

	var warnings []v1alpha1.ExpressionWarning
	check := func(field, expr string) *cel.Type {
		if expr == "" || len(expr) > MaxExpressionLength {
			return nil
		}
		ast, iss := env.Compile(expr)
		if iss.Err() != nil {
			warnings = append(warnings, v1alpha1.ExpressionWarning{FieldRef: field, Warning: issuesMessage(iss)})
			return nil
		}
		return ast.OutputType()
	}
	for i, v := range ruleSpec.Variables {
		if i >= MaxVariables || checkVariableName(v.Name) != "" {
			break
		}
		out := check(fmt.Sprintf("spec.variables[%d].expression", i), v.Expression)
		variablesType.Fields[v.Name] = apiservercel.NewDeclField(v.Name, declTypeOf(out), true, nil, nil)
	}
	check(fieldSuccess, ruleSpec.Success)
	check(fieldFailure, ruleSpec.Failure)
	check(fieldMessage, ruleSpec.Message)
	return warnings
}
