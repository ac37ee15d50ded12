package local

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"spaces"
	"spaces/infra/iamcheck"
)

// iamRecord is the committed record of the calls this package's tests make
// with each function's role (package iamcheck).
const iamRecord = "../iamcheck/testdata/calls.txt"

var updateIAM = flag.Bool("iam.update", false, "add the AWS calls this run records to "+iamRecord)

// runCheckingIAM runs the tests with every stack's calls recorded, then
// checks that each call is allowed by its function's role in template.yaml
// and is in the committed record (which -iam.update extends), so that
// infra/iamcheck's tests can hold every grant to a recorded call. Any
// failure fails the run, as a test's would.
func runCheckingIAM(m *testing.M) int {
	iamRecorder = iamcheck.NewRecorder()
	code := m.Run()
	calls := iamRecorder.Calls()
	var problems []string
	pol, err := iamcheck.Read(spaces.Template)
	if err != nil {
		problems = append(problems, err.Error())
	} else {
		problems = append(problems, pol.Denied(calls)...)
	}
	recorded, err := iamcheck.ReadRecord(iamRecord)
	if err != nil {
		problems = append(problems, err.Error())
	}
	known := map[iamcheck.Call]bool{}
	for _, c := range recorded {
		known[c] = true
	}
	var added []iamcheck.Call
	for _, c := range calls {
		if !known[c] {
			added = append(added, c)
		}
	}
	switch {
	case len(added) == 0:
	case *updateIAM:
		if err := iamcheck.WriteRecord(iamRecord, append(recorded, added...)); err != nil {
			problems = append(problems, err.Error())
		} else {
			fmt.Fprintf(os.Stderr, "iamcheck: %d calls added to %s\n", len(added), iamRecord)
		}
	default:
		for _, c := range added {
			problems = append(problems, fmt.Sprintf("%s: not in %s; run this package's tests with -iam.update to add it", c, iamRecord))
		}
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, "iamcheck:", p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: %d of the %d AWS calls the functions made are not proven (package infra/iamcheck)\n", len(problems), len(calls))
		return max(code, 1)
	}
	return code
}
