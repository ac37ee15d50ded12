package lambdarules

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
)

// Gateway serves h as the HTTP API's Lambda proxy integration of f does:
// each request is one invocation under f's rules (Run), its response
// buffered as Lambda returns it whole. An invocation that times out is a
// function error, which the HTTP API answers 500
// {"message":"Internal Server Error"}
// (https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-troubleshooting-lambda.html);
// the integration's own 30 s limit is above every function's Timeout here
// (https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-quotas.html).
func (f Function) Gateway(h http.Handler) http.Handler {
	return f.serveHTTP(h, http.StatusInternalServerError, `{"message":"Internal Server Error"}`)
}

// URL is a function's function URL, as its FunctionUrlConfig declares it.
type URL struct {
	// AuthType is NONE: the function authenticates its callers itself.
	AuthType string
}

// FunctionURL serves h as f's function URL does
// (https://docs.aws.amazon.com/lambda/latest/dg/urls-invocation.html):
// a function URL has no routes, so every method and path is one
// invocation of f (the function answers an unknown route itself), under
// f's rules (Run), buffered (InvokeMode BUFFERED). An invocation that
// fails or times out is answered 502, Lambda's answer when the function
// returns no valid response. It is an error for the template to give f
// no function URL: the local stack serves only what would be deployed.
func (f Function) FunctionURL(h http.Handler) (http.Handler, error) {
	if f.URL == nil {
		return nil, fmt.Errorf("lambdarules: template.yaml gives %s no FunctionUrlConfig", f.ID)
	}
	return f.serveHTTP(h, http.StatusBadGateway, `{"Message":"Internal Server Error"}`), nil
}

// serveHTTP runs each request as one invocation of f; failed answers
// failStatus with failBody, as the front door in question does.
func (f Function) serveHTTP(h http.Handler, failStatus int, failBody string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec, err := Run(r.Context(), f, TraceHeader("").Next(f.ID), func(ctx context.Context) (*httptest.ResponseRecorder, error) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r.WithContext(ctx))
			return rec, nil
		})
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(failStatus)
			_, _ = w.Write([]byte(failBody))
			return
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}
