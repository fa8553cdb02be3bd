package main

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	schemacel "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/pruning"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	"github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/config/crd"
)

// ruleSchema validates CompletionRules with the API server's own validators
// for custom resources, over the CRD that make manifests generates: pruning
// (unknown fields), defaulting, the OpenAPI schema (types, enums, bounds,
// patterns) and the x-kubernetes-validations rules.
type ruleSchema struct {
	structural *structuralschema.Structural
	validator  apiservervalidation.SchemaValidator
	cel        *schemacel.Validator
}

var loadRuleSchema = sync.OnceValues(func() (*ruleSchema, error) {
	def := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(crd.CompletionRules, def); err != nil {
		return nil, fmt.Errorf("reading the CompletionRule CRD: %w", err)
	}
	var v1 *apiextensionsv1.CustomResourceValidation
	for _, v := range def.Spec.Versions {
		if v.Name == v1alpha1.GroupVersion.Version {
			v1 = v.Schema
		}
	}
	if v1 == nil || v1.OpenAPIV3Schema == nil {
		return nil, fmt.Errorf("the CompletionRule CRD has no schema for %s", v1alpha1.GroupVersion.Version)
	}
	internal := &apiextensions.CustomResourceValidation{}
	if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v1, internal, nil); err != nil {
		return nil, err
	}
	s, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, fmt.Errorf("the CompletionRule CRD's schema: %w", err)
	}
	validator, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
	if err != nil {
		return nil, err
	}
	return &ruleSchema{structural: s, validator: validator, cel: schemacel.NewValidator(s, true, celconfig.PerCallLimit)}, nil
})

// validate checks a CompletionRule object (integers as int64) as the API
// server checks one it is asked to create with strict field validation (as
// kubectl asks): it returns the unknown fields' paths (the API server
// rejects the rule for them) and the validation errors. obj is pruned and
// defaulted in place.
func (s *ruleSchema) validate(ctx context.Context, obj map[string]any) (unknown []string, errs field.ErrorList) {
	unknown = pruning.PruneWithOptions(obj, s.structural, true, structuralschema.UnknownFieldPathOptions{TrackUnknownFieldPaths: true})
	structuraldefaulting.Default(obj, s.structural)
	// The API server clears the namespace of a cluster-scoped object
	// before it validates it (lint warns of one).
	u := (&unstructured.Unstructured{Object: obj}).DeepCopy()
	u.SetNamespace("")
	errs = append(errs, apimachineryvalidation.ValidateObjectMetaAccessor(u, false, path.ValidatePathSegmentName, field.NewPath("metadata"))...)
	errs = append(errs, apiservervalidation.ValidateCustomResource(nil, obj, s.validator)...)
	celErrs, _ := s.cel.Validate(ctx, nil, s.structural, obj, nil, celconfig.RuntimeCELCostBudget)
	errs = append(errs, celErrs...)
	return unknown, errs
}
