package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"testing"

	uberzap "go.uber.org/zap"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// TestQuietRotator: the certificate rotator's conflicts are information,
// every other error stays an error, and each line names its caller (the
// wrapper adds no frame to what the log says).
func TestQuietRotator(t *testing.T) {
	var buf bytes.Buffer
	log := quieten(zap.New(zap.WriteTo(&buf), zap.RawZapOpts(uberzap.AddCaller())))
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "secrets"}, "cert", errors.New("modified"))

	_, _, line, _ := runtime.Caller(0)
	log.WithName("cert-rotation").Error(conflict, "could not refresh CA and server certs")
	log.WithName("cert-rotation").Error(errors.New("boom"), "something else")
	log.WithName("setup").Error(conflict, "not the rotator")
	log.WithName("setup").Info("information")

	var got []struct{ Level, Logger, Msg, Caller string }
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var e struct{ Level, Logger, Msg, Caller string }
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("%q: %v", l, err)
		}
		got = append(got, e)
	}
	if len(got) != 4 {
		t.Fatalf("%d lines:\n%s", len(got), buf.String())
	}
	for i, want := range []string{"info", "error", "error", "info"} {
		if got[i].Level != want {
			t.Errorf("line %d (%s: %s): level %s, want %s", i, got[i].Logger, got[i].Msg, got[i].Level, want)
		}
		if wantCaller := "logs_test.go:" + strconv.Itoa(line+1+i); !strings.HasSuffix(got[i].Caller, wantCaller) {
			t.Errorf("line %d: caller %s, want %s", i, got[i].Caller, wantCaller)
		}
	}
}
