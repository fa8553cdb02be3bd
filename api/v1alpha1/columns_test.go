package v1alpha1

import (
	"os"
	"path/filepath"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// kubectl get completionrules tells a trigger kind from one of the same
// name in another group (batch's Job, batch.volcano.sh's Job): the
// trigger's group is a column beside its kind, in the default output.
func TestTriggerGroupColumn(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "crd", "bases", "wrapup.dev_completionrules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		cols := v.AdditionalPrinterColumns
		for i, c := range cols {
			if c.JSONPath != ".spec.trigger.kind" {
				continue
			}
			if i+1 >= len(cols) || cols[i+1].JSONPath != ".spec.trigger.apiGroup" || cols[i+1].Priority != 0 {
				t.Errorf("%s: the column after %s is not the trigger's group in the default output: %+v", v.Name, c.Name, cols)
			}
			return
		}
		t.Errorf("%s: no column of the trigger kind: %+v", v.Name, cols)
	}
}
