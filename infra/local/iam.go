package local

import (
	"net/http"

	"spaces"
	"spaces/infra/iamcheck"
)

// iamRecorder, when set (this package's tests set it in TestMain), records
// the AWS requests every function of every stack started afterwards makes
// with its role (package iamcheck); nil adds nothing to any client.
var iamRecorder *iamcheck.Recorder

// recordIAM adds iamRecorder's middleware to the stack's SDK
// configuration, naming the stack's resources and functions by their
// logical ids. It runs before any client is built from st.AWS.
func (st *Stack) recordIAM(cfg Config) error {
	if iamRecorder == nil {
		return nil
	}
	l, err := iamcheck.ForStack(spaces.Template)
	if err != nil {
		return err
	}
	for id, r := range st.Resources {
		l.Names[r.Name] = id
	}
	for id := range st.Functions {
		l.Names[cfg.Names(id)] = id
	}
	st.AWS.APIOptions = append(st.AWS.APIOptions, iamRecorder.APIOption(l))
	return nil
}

// recordWakes is t with the agents' wakes (IoT Core's data plane, signed
// HTTP requests rather than an SDK client's) recorded too.
func recordWakes(t http.RoundTripper) http.RoundTripper {
	if iamRecorder == nil {
		return t
	}
	return iamRecorder.IoTData(t)
}
