package problemconn

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// FuzzAsProblem: whatever the server writes, the rewrite either leaves it
// alone or answers one well-formed problem response with the status the
// server chose; a handler's own answer (Date, sorted headers) is never
// touched.
func FuzzAsProblem(f *testing.F) {
	f.Add([]byte("HTTP/1.1 400 Bad Request" + goErrorHeaders + "400 Bad Request"))
	f.Add([]byte("HTTP/1.1 400 Bad Request: missing required Host header" + goErrorHeaders + "400 Bad Request: missing required Host header"))
	f.Add([]byte("HTTP/1.1 431 Request Header Fields Too Large" + goErrorHeaders + "431 Request Header Fields Too Large"))
	f.Add([]byte("HTTP/1.1 501 Not Implemented" + goErrorHeaders + "Unsupported transfer encoding"))
	f.Add([]byte("HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Type: application/problem+json\r\nDate: Tue, 01 Dec 2026 00:00:00 GMT\r\n\r\n{}"))
	f.Fuzz(func(t *testing.T, written []byte) {
		out, ok := asProblem(written)
		if !ok {
			if !bytes.Contains(written, []byte(goErrorHeaders)) && out != nil {
				t.Fatalf("no rewrite but output %q", out)
			}
			return
		}
		res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(out)), nil)
		if err != nil {
			t.Fatalf("rewrite of %q is not a response: %v", written, err)
		}
		body, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		var p struct {
			Type   string `json:"type"`
			Status int    `json:"status"`
			Title  string `json:"title"`
		}
		if res.StatusCode < 400 || res.Header.Get("Content-Type") != "application/problem+json" ||
			json.Unmarshal(body, &p) != nil || p.Status != res.StatusCode || p.Type == "" || p.Title == "" {
			t.Fatalf("rewrite of %q: %q", written, out)
		}
	})
}
