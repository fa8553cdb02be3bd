package gc

import (
	"encoding/json"
	"testing"

	awv1beta2 "github.com/project-codeflare/appwrapper/api/v1beta2"
	"k8s.io/apimachinery/pkg/runtime"
)

func jobComponent(t *testing.T, apiVersion, kind, name string) awv1beta2.AppWrapperComponent {
	raw, err := json.Marshal(map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name}})
	if err != nil {
		t.Fatal(err)
	}
	return awv1beta2.AppWrapperComponent{Template: runtime.RawExtension{Raw: raw}}
}
