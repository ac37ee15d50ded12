// Package emulatortest gives tests the embedded AWS emulator with the
// repository's resources, under names no other test uses.
package emulatortest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"regexp"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"spaces"
	"spaces/infra/emulator"
)

// Env is one test's view of the emulator.
type Env struct {
	Emulator *emulator.Emulator
	// Config is an SDK configuration pointed at the emulator.
	Config aws.Config
	// Endpoint is the emulator's URL, for the awsclient constructors.
	Endpoint string
	// Prefix starts every physical name created for this test.
	Prefix string
	// Resources are the template's resources, by logical id.
	Resources emulator.Resources
}

// Name returns the physical name of a logical id of the template, failing
// the test when the template does not declare it.
func (e *Env) Name(t testing.TB, logicalID string) string {
	t.Helper()
	r, ok := e.Resources[logicalID]
	if !ok {
		t.Fatalf("emulatortest: the template has no resource %s", logicalID)
	}
	return r.Name
}

// One emulator per test binary: kumo's state is process-global anyway, and a
// server per test would only multiply listeners.
var shared struct {
	once sync.Once
	emu  *emulator.Emulator
	err  error
}

func emu(t testing.TB) *emulator.Emulator {
	t.Helper()
	shared.once.Do(func() {
		ctx := context.Background()
		if shared.emu, shared.err = emulator.Start(ctx); shared.err == nil {
			// Without the patched kumo the tests would fail far from the
			// cause (no cascade, no stream records): stop here, saying how.
			shared.err = shared.emu.Check(ctx)
		}
	})
	if shared.err != nil {
		t.Fatalf("emulatortest: start emulator: %v", shared.err)
	}
	return shared.emu
}

// Start creates the resources of the repository's template.yaml for this
// test under a unique prefix. Nothing is deleted afterwards: the names are
// never reused.
func Start(t testing.TB) *Env { return StartWith(t, spaces.Template) }

// StartWith is Start with another template (for tests of the emulator itself).
func StartWith(t testing.TB, template []byte) *Env {
	t.Helper()
	e := emu(t)
	prefix := Prefix(t)
	res, err := e.CreateResources(t.Context(), template, func(id string) string { return prefix + id })
	if err != nil {
		t.Fatalf("emulatortest: create resources: %v", err)
	}
	return &Env{Emulator: e, Config: e.Config(), Endpoint: e.URL, Prefix: prefix, Resources: res}
}

var unsafeChars = regexp.MustCompile(`[^A-Za-z0-9]+`)

// Prefix returns a name prefix unique to this call: a short form of the
// test's name (for reading the emulator's state) and random hex. It fits in
// table, queue and bus names (letters, digits, '-', '_').
func Prefix(t testing.TB) string {
	name := unsafeChars.ReplaceAllString(t.Name(), "")
	if len(name) > 24 {
		name = name[:24]
	}
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return name + "-" + hex.EncodeToString(b[:]) + "-"
}

// QueueDepth answers a queue's approximate visible and in-flight message
// counts, as SQS reports them.
func QueueDepth(t testing.TB, c *sqs.Client, url string) (visible, inFlight string) {
	t.Helper()
	a, err := c.GetQueueAttributes(t.Context(), &sqs.GetQueueAttributesInput{QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{
		sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
	if err != nil {
		t.Fatal(err)
	}
	return a.Attributes["ApproximateNumberOfMessages"], a.Attributes["ApproximateNumberOfMessagesNotVisible"]
}
