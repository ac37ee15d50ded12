package local

import (
	"net/http"
	"strings"
	"testing"
)

// TestDevSignInRefusals: the development sign-in answers like the API
// (nosniff, problems with type and instance naming the field) and takes
// only JSON, so a cross-origin form or text/plain post (which a browser
// sends without a preflight) cannot mint a token.
func TestDevSignInRefusals(t *testing.T) {
	st := startStack(t)
	post := func(ctype, body string) *http.Response {
		req, _ := http.NewRequest("POST", st.APIURL+DevSignInPath, strings.NewReader(body))
		if ctype != "" {
			req.Header.Set("Content-Type", ctype)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	cases := []struct {
		name, ctype, body string
		status            int
		field             string
	}{
		{"text/plain", "text/plain", `{"org":"acme"}`, 415, "Content-Type"},
		{"form", "application/x-www-form-urlencoded", `{"org":"acme"}`, 415, "Content-Type"},
		{"no content type", "", `{"org":"acme"}`, 415, "Content-Type"},
		{"not JSON", "application/json", `org=acme`, 400, "body"},
		{"bad org", "application/json", `{"org":"a b"}`, 422, "org"},
		{"no org", "application/json", `{}`, 422, "org"},
	}
	for _, tc := range cases {
		res := post(tc.ctype, tc.body)
		var body strings.Builder
		buf := make([]byte, 4096)
		n, _ := res.Body.Read(buf)
		body.Write(buf[:n])
		res.Body.Close()
		if res.StatusCode != tc.status {
			t.Errorf("%s: %d, want %d: %s", tc.name, res.StatusCode, tc.status, body.String())
			continue
		}
		if res.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: no X-Content-Type-Options: nosniff", tc.name)
		}
		checkProblem(t, "sign-in/"+tc.name, res.StatusCode, res.Header, []byte(body.String()), tc.field)
		if !strings.Contains(body.String(), `"instance":"`+DevSignInPath+`"`) {
			t.Errorf("%s: problem without instance: %s", tc.name, body.String())
		}
	}
	ok := post("application/json", `{"org":"acme"}`)
	ok.Body.Close()
	if ok.StatusCode != 200 || ok.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("sign-in: %d %v", ok.StatusCode, ok.Header)
	}
}
