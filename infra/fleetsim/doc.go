// Package fleetsim holds the fleet simulation (fleet_test.go): real agents
// (agent/client's Run, paho included), the broker model (infra/iotcore)
// with the template's authorizer and topic rule, the agent and presence
// handlers (shared/wiring/agents) and the scheduler and prober
// (shared/probing) on the
// store in the emulator, all on one simulated clock for days of a fleet's
// life, so that what only shows over hours and days (credential renewals,
// IoT Core's hourly authorizer refresh, version resets after an hour
// disconnected, outages, a re-issued bootstrap, a deregistration) is run,
// in seconds of real time; and the agent space's monthly cost,
// BenchmarkAgentFleetMonth (month_bench_test.go), counted over a
// simulated month of it. It has no code outside its tests.
package fleetsim
