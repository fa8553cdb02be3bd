package gc

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	wrapupv1alpha1 "github.com/wrapup-dev/wrapup/api/v1alpha1"
	"github.com/wrapup-dev/wrapup/celpolicies"
	"github.com/wrapup-dev/wrapup/gc/decision"
)

// RuleValidator rejects, at admission, a rule whose CEL does not compile,
// so that `kubectl apply` of a bad rule fails with the compile error instead
// of storing a rule that only reports Ready=False. The CRD's own validation
// rules run first; this adds what only the CEL compiler knows.
type RuleValidator struct {
	// Mapper and Schemas, when set, type-check an admitted rule against
	// its trigger kind's schema, as the rule controller does: what it
	// would write on status.typeChecking comes back as admission warnings,
	// which kubectl prints at apply time.
	Mapper  meta.RESTMapper
	Schemas resolver.SchemaResolver
}

// NewRuleValidator is a RuleValidator that type-checks against the
// schemas the API server of mgr publishes, read at each admission (rules
// are seldom written; a CRD installed a moment ago is seen).
func NewRuleValidator(mgr ctrl.Manager) (*RuleValidator, error) {
	cfg := rest.CopyConfig(mgr.GetConfig())
	cfg.Timeout = warningsTimeout
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("creating discovery client: %w", err)
	}
	return &RuleValidator{Mapper: mgr.GetRESTMapper(), Schemas: &resolver.ClientDiscoveryResolver{Discovery: dc}}, nil
}

// failurePolicy is Ignore: the webhook only gives the compile error early.
// What keeps a bad rule from acting is the controller, which never acts on
// a rule that does not compile. With Fail, a webhook that is down would
// also refuse the admin's emergency edits (dryRun: true, a fixed
// expression, a narrower selector) exactly when they may be needed.
// +kubebuilder:webhook:path=/validate-wrapup-dev-v1alpha1-completionrule,mutating=false,failurePolicy=ignore,timeoutSeconds=5,sideEffects=None,groups=wrapup.dev,resources=completionrules,verbs=create;update,versions=v1alpha1,name=vcompletionrule.wrapup.dev,admissionReviewVersions=v1

// SetupWebhookWithManager serves the validator on mgr's webhook server.
func (v *RuleValidator) SetupWebhookWithManager(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &wrapupv1alpha1.CompletionRule{}).WithValidator(v).Complete()
}

// ValidateCreate compiles the new rule.
func (v *RuleValidator) ValidateCreate(ctx context.Context, rule *wrapupv1alpha1.CompletionRule) (admission.Warnings, error) {
	return v.validate(ctx, rule)
}

// ValidateUpdate compiles the updated rule.
func (v *RuleValidator) ValidateUpdate(ctx context.Context, _, rule *wrapupv1alpha1.CompletionRule) (admission.Warnings, error) {
	return v.validate(ctx, rule)
}

// ValidateDelete allows every deletion.
func (v *RuleValidator) ValidateDelete(context.Context, *wrapupv1alpha1.CompletionRule) (admission.Warnings, error) {
	return nil, nil
}

// warningsTimeout bounds the schema reads of the type check at admission,
// well within the webhook's timeout (5 s): a slow API server costs the
// warnings, never the admission (the rule's status says them later).
const warningsTimeout = 2 * time.Second

// validate refuses rule as below, and else warns of what its
// type check says, unless that takes longer than warningsTimeout or than
// ctx allows.
func (v *RuleValidator) validate(ctx context.Context, rule *wrapupv1alpha1.CompletionRule) (admission.Warnings, error) {
	// Refused: what the controller could never act on, an expression that
	// does not compile, a selector that does not parse, a trigger kind that
	// cannot be in the group it names (decision.RuleProblems, the checks
	// kubectl wrapup lint makes too).
	var errs field.ErrorList
	if _, err := celpolicies.Compile(&rule.Spec); err != nil {
		ce, ok := err.(*celpolicies.CompileError)
		if !ok {
			return nil, apierrors.NewInternalError(fmt.Errorf("compiling rule: %w", err))
		}
		for _, fe := range ce.Errors {
			errs = append(errs, field.Invalid(field.NewPath(fe.Field), fe.Expression, fe.Message))
		}
	}
	for _, p := range decision.RuleProblems(rule) {
		if p.Fatal {
			errs = append(errs, field.Invalid(field.NewPath(p.Field), p.Value, p.Message))
		}
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(wrapupv1alpha1.GroupVersion.WithKind("CompletionRule").GroupKind(), rule.Name, errs)
	}
	done := make(chan admission.Warnings, 1)
	go func() { done <- v.warnings(rule) }()
	select {
	case w := <-done:
		return w, nil
	case <-time.After(warningsTimeout): // collected unstopped since Go 1.23
	case <-ctx.Done():
	}
	return nil, nil
}

// warnings are the type-check warnings of rule, as admission warnings.
func (v *RuleValidator) warnings(rule *wrapupv1alpha1.CompletionRule) admission.Warnings {
	gk := decision.RuleKind(rule)
	if v.Mapper == nil || v.Schemas == nil || gk.Kind == "" {
		return nil
	}
	mapping, err := v.Mapper.RESTMapping(gk)
	if err != nil {
		return nil
	}
	s, err := v.Schemas.ResolveSchema(mapping.GroupVersionKind)
	if err != nil {
		return nil
	}
	var out admission.Warnings
	for _, w := range celpolicies.TypeChecking(rule, mapping.GroupVersionKind, s).ExpressionWarnings {
		out = append(out, decision.Truncate(w.FieldRef+": "+w.Warning, 512))
	}
	return out
}
