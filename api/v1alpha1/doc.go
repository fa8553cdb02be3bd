// Package v1alpha1 holds the wrapup.dev/v1alpha1 API: CompletionRule.
// +kubebuilder:object:generate=true
// +groupName=wrapup.dev
package v1alpha1
