package httplimit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/shardlimit/limiter"
)

// ProblemTypeQuotaExceeded is the problem type of a 429 answer, from the
// RateLimit header fields draft
// (https://datatracker.ietf.org/doc/draft-ietf-httpapi-ratelimit-headers/),
// which also defines its "violated-policies" member.
const ProblemTypeQuotaExceeded = "https://iana.org/assignments/http-problem-types#quota-exceeded"

// Problem is an RFC 9457 problem detail, the body of every error answer of
// the middleware (media type application/problem+json). Members that do
// not apply are left out.
type Problem struct {
	// Type identifies the kind of problem: ProblemTypeQuotaExceeded for a
	// 429, "about:blank" (the status code says it all) otherwise.
	Type string `json:"type"`
	// Title is a short summary of the type; Status the HTTP status code;
	// Detail what happened to this request.
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// ViolatedPolicies names the limits that refused the request, in name
	// order, as the RateLimit fields name them (a parent's with
	// ParentPrefix).
	ViolatedPolicies []string `json:"violated-policies,omitempty"`
	// RetryAfter is the Retry-After of the answer, in seconds.
	RetryAfter int64 `json:"retry_after,omitempty"`
	// Limits details each refusing limit, in the same order.
	Limits []ProblemLimit `json:"limits,omitempty"`
}

// ProblemLimit is one limit that refused a request, amounts in tokens.
type ProblemLimit struct {
	// Name is the limit's name as the RateLimit fields name it (a cascade
	// parent's with ParentPrefix).
	Name string `json:"name"`
	// Requested is what the request asked of the limit; Remaining what the
	// limit holds (it may be above zero, below Requested).
	Requested int64 `json:"requested"`
	Remaining int64 `json:"remaining"`
	// RetryAfter is how long, in whole seconds rounded up, until the
	// limit can serve Requested.
	RetryAfter int64 `json:"retry_after"`
}

// RequestError is an error answered with a 4xx status: the key or cost
// function failed, or the limiter refused the entity, resource or amounts
// they derived from the request as invalid. Key and cost functions may
// return one to choose the status, such as 401 for a missing API key; any
// other error they return is wrapped in one with status 400.
type RequestError struct {
	// Status is the HTTP status code, 400 when zero.
	Status int
	// Err is the cause; its message is the problem's detail, so it is
	// shown to the client.
	Err error
}

// Error returns the error's message.
func (e *RequestError) Error() string {
	if e == nil {
		return http.StatusText(http.StatusBadRequest)
	}
	if e.Err == nil {
		return http.StatusText(e.status())
	}
	return e.Err.Error()
}

// Unwrap returns the cause.
func (e *RequestError) Unwrap() error {
	if e == nil {
		return nil
	}
	return e.Err
}

func (e *RequestError) status() int {
	if e == nil || e.Status < 400 || e.Status > 499 {
		return http.StatusBadRequest
	}
	return e.Status
}

// WriteError is the default [ErrorHandler]: it answers err as a problem
// detail.
//
//   - *limiter.RateLimitedError: 429, type ProblemTypeQuotaExceeded, the
//     limits that refused and the retry-after; it sets Retry-After when it
//     is not set already (the middleware sets it, with the RateLimit
//     fields).
//   - limiter.ErrDisabled (an operator set the scope's mode to refuse):
//     403, with no Retry-After (retrying does not help) and a detail that
//     names no key.
//   - *RequestError: its status (400 by default), the error as detail.
//   - *limiter.UnavailableError (the store failed and the policy is
//     fail-closed): 503 with Retry-After: 1.
//   - anything else: 500, with a detail that reveals nothing.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	var (
		rl  *limiter.RateLimitedError
		re  *RequestError
		p   Problem
		hdr = w.Header()
	)
	switch {
	case errors.As(err, &rl) && rl != nil:
		p = refusalProblem(rl)
		if hdr.Get(HeaderRetryAfter) == "" {
			hdr.Set(HeaderRetryAfter, strconv.FormatInt(p.RetryAfter, 10))
		}
	case errors.Is(err, limiter.ErrDisabled):
		p = Problem{Status: http.StatusForbidden, Detail: "This key is not allowed to use this resource now."}
	case errors.As(err, &re):
		p = Problem{Status: re.status(), Detail: re.Error()}
	case errors.Is(err, limiter.ErrUnavailable):
		p = Problem{Status: http.StatusServiceUnavailable, Detail: "The rate limiter is unavailable; try again shortly."}
		hdr.Set(HeaderRetryAfter, "1")
	default:
		p = Problem{Status: http.StatusInternalServerError, Detail: "The rate limiter failed."}
	}
	if p.Type == "" {
		p.Type, p.Title = "about:blank", http.StatusText(p.Status)
	}
	writeProblem(w, p)
}

func writeProblem(w http.ResponseWriter, p Problem) {
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false) // a JSON body, not HTML: keep "<key>" readable
	_ = enc.Encode(p)        // strings and integers cannot fail
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("Content-Length", strconv.Itoa(body.Len()))
	h.Del("Content-Encoding")
	w.WriteHeader(p.Status)
	_, _ = w.Write(body.Bytes())
}

// refusalProblem describes a refusal: the exceeded limits, in name order.
func refusalProblem(e *limiter.RateLimitedError) Problem {
	p := Problem{Type: ProblemTypeQuotaExceeded, Title: "Rate limit exceeded", Status: http.StatusTooManyRequests,
		RetryAfter: retryAfter(e)}
	var parts []string
	for _, s := range (fields{}).refusalStates(e) {
		if !s.Exceeded {
			continue
		}
		p.ViolatedPolicies = append(p.ViolatedPolicies, s.name)
		p.Limits = append(p.Limits, ProblemLimit{Name: s.name, Requested: s.Requested, Remaining: s.Remaining,
			RetryAfter: s.RetryAfterSeconds()})
		parts = append(parts, fmt.Sprintf("%s (requested %d, remaining %d)", s.name, s.Requested, s.Remaining))
	}
	if len(parts) == 0 {
		p.Detail = fmt.Sprintf("The request was refused; retry after %d s.", p.RetryAfter)
	} else {
		p.Detail = fmt.Sprintf("Rate limit exceeded: %s; retry after %d s.", strings.Join(parts, ", "), p.RetryAfter)
	}
	return p
}
