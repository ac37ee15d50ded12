package lambdarules

import (
	"context"
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
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec, err := Run(r.Context(), f, TraceHeader("").Next(f.ID), func(ctx context.Context) (*httptest.ResponseRecorder, error) {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r.WithContext(ctx))
			return rec, nil
		})
		if err != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"message":"Internal Server Error"}`))
			return
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
}
