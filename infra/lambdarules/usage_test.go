package lambdarules

import (
	"context"
	"testing"
	"time"
)

// TestUsageCountsBilledInvocations: each invocation that runs is counted,
// its duration rounded up to the millisecond, at the function's
// MemorySize (its own, else the Globals', else 128); a throttled one runs
// nothing and is not counted.
func TestUsageCountsBilledInvocations(t *testing.T) {
	fs, err := Read([]byte(`Globals:
  Function:
    MemorySize: 256
Resources:
  Own:
    Type: AWS::Serverless::Function
    Properties:
      MemorySize: 512
      ReservedConcurrentExecutions: 1
  Global:
    Type: AWS::Serverless::Function
`))
	if err != nil {
		t.Fatal(err)
	}
	f := fs.Get("Own")
	if f.MemoryMB != 512 || fs.Get("Global").MemoryMB != 256 {
		t.Fatalf("memory sizes %d, %d, want 512, 256", f.MemoryMB, fs.Get("Global").MemoryMB)
	}
	if noGlobals, err := Read([]byte("Resources:\n  F:\n    Type: AWS::Serverless::Function\n")); err != nil || noGlobals.Get("F").MemoryMB != DefaultMemoryMB {
		t.Fatalf("the default memory size: %v", err)
	}
	held, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := Run(context.Background(), f, "", func(context.Context) (int, error) {
			close(held)
			<-release
			return 0, nil
		})
		done <- err
	}()
	<-held
	// The one execution is taken: this one is throttled.
	if _, err := Run(context.Background(), f, "", func(context.Context) (int, error) { return 0, nil }); !IsThrottled(err) {
		t.Fatalf("a second invocation at reserved concurrency 1: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), f, "", func(context.Context) (int, error) { return 0, nil }); err != nil {
		t.Fatal(err)
	}
	u := f.Usage()
	if u.Invocations != 2 || f.Throttled() != 1 {
		t.Errorf("%d invocations and %d throttled, want 2 and 1", u.Invocations, f.Throttled())
	}
	if u.Billed < 2*time.Millisecond || u.Billed%time.Millisecond != 0 {
		t.Errorf("billed %s: each invocation is at least 1 ms, in whole milliseconds", u.Billed)
	}
	if got, want := u.GBSeconds(), u.Billed.Seconds()*0.5; got != want {
		t.Errorf("%v GB-s, want %v", got, want)
	}
	if d := f.Usage().Sub(u); d.Invocations != 0 || d.Billed != 0 {
		t.Errorf("nothing ran since: %+v", d)
	}
}
