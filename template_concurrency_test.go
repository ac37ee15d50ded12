package spaces_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// Lambda's default concurrency per account and region, and what must stay
// unreserved of it: https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html,
// https://docs.aws.amazon.com/lambda/latest/dg/configuration-concurrency.html.
const (
	accountConcurrency = 1000
	alwaysUnreserved   = 100
)

// number reads a template number: a literal, or a parameter's value, the
// largest it may take (MaxValue) when largest, else its default.
func number(t *testing.T, tpl rawTemplate, v any, largest bool) int {
	t.Helper()
	if p := ref(v); p != "" {
		par, ok := tpl.Parameters[p]
		if !ok {
			t.Fatalf("%s is not a parameter", p)
		}
		v = par["Default"]
		if largest {
			mv, ok := par["MaxValue"]
			if !ok {
				t.Fatalf("parameter %s has no MaxValue: nothing bounds it", p)
			}
			v = mv
		}
	}
	n, err := strconv.Atoi(fmt.Sprint(v))
	if err != nil {
		t.Fatalf("%v is not a number", v)
	}
	return n
}

// timeout is a function's Timeout, its own or the Globals'.
func timeout(t *testing.T, tpl rawTemplate, fn string) int {
	if v, ok := tpl.Resources[fn].Properties["Timeout"]; ok {
		return number(t, tpl, v, true)
	}
	return number(t, tpl, tpl.Globals["Function"]["Timeout"], true)
}

// TestConcurrencyIsBounded: every function has reserved concurrency (a
// floor no other function can take and a ceiling it cannot pass), every
// queue trigger a MaximumConcurrency no higher than its function's
// reservation, and all reservations, parameters at their largest, leave
// the account's default concurrency its 100 unreserved. A function serving
// both authenticated and unauthenticated routes throttles the latter so
// that, even if all ran to its Timeout at once, they hold at most half of its
// reservation.
func TestConcurrencyIsBounded(t *testing.T) {
	tpl := parseRaw(t)
	sum := 0
	for _, fn := range tpl.ofType("AWS::Serverless::Function") {
		p := tpl.Resources[fn].Properties
		rv, ok := p["ReservedConcurrentExecutions"]
		if !ok {
			t.Errorf("%s: no ReservedConcurrentExecutions", fn)
			continue
		}
		reserved := number(t, tpl, rv, false)
		sum += number(t, tpl, rv, true)
		events, _ := p["Events"].(map[string]any)
		var open, authed []string
		for name, ev := range events {
			switch get(ev, "Type") {
			case "SQS":
				mc := get(ev, "Properties", "ScalingConfig", "MaximumConcurrency")
				if mc == nil {
					t.Errorf("%s.%s: SQS trigger without ScalingConfig.MaximumConcurrency", fn, name)
				} else if n := number(t, tpl, mc, false); n > reserved {
					t.Errorf("%s.%s: MaximumConcurrency %d above the function's reserved %d: Lambda would throttle it", fn, name, n, reserved)
				}
			case "HttpApi":
				route := strings.ToUpper(fmt.Sprint(get(ev, "Properties", "Method"))) + " " + fmt.Sprint(get(ev, "Properties", "Path"))
				if get(ev, "Properties", "Auth", "Authorizer") == "NONE" {
					open = append(open, route)
				} else {
					authed = append(authed, route)
				}
			}
		}
		if len(open) == 0 || len(authed) == 0 {
			continue
		}
		// Together, not each: an attacker uses every open route at once.
		held := 0
		for _, route := range open {
			rs := get(tpl.Resources["HttpApi"].Properties, "RouteSettings", route)
			if rs == nil {
				t.Errorf("%s: unauthenticated %s shares the function with authenticated routes and has no RouteSettings throttle", fn, route)
				continue
			}
			rate := number(t, tpl, get(rs, "ThrottlingRateLimit"), true)
			burst := number(t, tpl, get(rs, "ThrottlingBurstLimit"), true)
			held += burst + rate*timeout(t, tpl, fn)
		}
		if 2*held > reserved {
			t.Errorf("%s: its unauthenticated routes %v may hold %d (burst + rate x Timeout, summed) of its %d reserved, more than half", fn, open, held, reserved)
		}
	}
	if sum+alwaysUnreserved > accountConcurrency {
		t.Errorf("functions reserve up to %d: with %d unreserved, more than the account's default %d", sum, alwaysUnreserved, accountConcurrency)
	}
}
