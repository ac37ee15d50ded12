// Package problemconn makes a local HTTP server answer the requests net/http
// refuses before any handler runs (a header value with a control byte, no
// Host, a malformed request line) with a problem document, like every other
// 4xx of the API, instead of net/http's plain text.
package problemconn

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"

	"spaces/shared/httpapi"
)

// goErrorHeaders are the headers net/http writes, in this order, only on the
// answer it gives itself to a request it cannot parse (server.go, conn.serve),
// before any handler runs. A handler's answer carries Date and sorts
// Connection before Content-Type, so it never matches.
const goErrorHeaders = "\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n"

// Listener hands out connections whose pre-handler refusals are answered
// as problems. net/http has no hook for these answers, so the connection
// rewrites that one write: it is a single Write of status line, those exact
// headers and a text body, after which the server closes the connection.
type Listener struct{ net.Listener }

func (l Listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return problemConn{c}, nil
}

type problemConn struct{ net.Conn }

func (c problemConn) Write(p []byte) (int, error) {
	if answer, ok := asProblem(p); ok {
		if _, err := c.Conn.Write(answer); err != nil {
			return 0, err
		}
		return len(p), nil
	}
	return c.Conn.Write(p)
}

// asProblem rewrites net/http's own refusal "HTTP/1.1 <code> <text>[: detail]"
// into a problem response with the same status.
func asProblem(p []byte) ([]byte, bool) {
	head, _, found := bytes.Cut(p, []byte(goErrorHeaders))
	if !found || !bytes.HasPrefix(head, []byte("HTTP/1.1 ")) || bytes.Contains(head, []byte("\r\n")) {
		return nil, false
	}
	codeText, reason, _ := strings.Cut(string(head[len("HTTP/1.1 "):]), " ")
	code, err := strconv.Atoi(codeText)
	if err != nil || code < 400 || code > 599 || http.StatusText(code) == "" {
		return nil, false
	}
	detail := "the request could not be read: check its request line and headers (no control characters in header values)"
	if _, d, ok := strings.Cut(reason, ": "); ok {
		detail = "the request could not be read: " + d
	}
	body := httpapi.UnreadableRequest(code, detail)
	var b bytes.Buffer
	fmt.Fprintf(&b, "HTTP/1.1 %d %s\r\nContent-Type: application/problem+json\r\nContent-Length: %d\r\nX-Content-Type-Options: nosniff\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n", code, http.StatusText(code), len(body))
	b.Write(body)
	return b.Bytes(), true
}
