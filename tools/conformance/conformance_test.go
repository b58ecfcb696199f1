// The Gateway API conformance suite, built as a test binary (go test -c) so
// tests/gateway can run it against ferryman on the test apiserver. Both
// sigs.k8s.io/gateway-api and its conformance module are pinned in go.mod:
// the conformance module's own go.mod points at the other through a local
// replace that Go ignores for dependencies.
package conformance_test

import (
	"testing"

	"sigs.k8s.io/gateway-api/conformance"
)

func TestConformance(t *testing.T) { conformance.RunConformance(t) }
