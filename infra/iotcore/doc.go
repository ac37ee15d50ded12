// Package iotcore is the local model of AWS IoT Core's message broker, so the
// local stack and the tests run the agent's presence channel (MQTT over TLS,
// custom authorizer, lifecycle events, a topic rule to SQS, data-plane
// Publish) on one machine, as the emulator does for DynamoDB and SQS.
//
// It is built on github.com/mochi-mqtt/server/v2 (MQTT 3.1.1 and 5 over TLS)
// and models, each rule beside the AWS page it follows:
//   - custom authorizers chosen by the MQTT username's
//     ?x-amz-customauthorizer-name= query, their response validated, the
//     connection's end at disconnectAfterInSeconds and the policy refresh at
//     refreshAfterInSeconds, which re-sends the CONNECT's own password;
//   - IoT policy evaluation of iot:Connect, iot:Subscribe, iot:Receive and
//     iot:Publish (Allow/Deny, '*' and '?' wildcards, explicit Deny wins,
//     default deny);
//   - keep-alive (30-1200 s, disconnect after 1.5 x) read from Config.Now, so
//     tests drive a fake clock;
//   - client id takeover, lifecycle events (connected, disconnected,
//     connect_failed) with per-client version numbers from 0, reset to 0
//     after Config.VersionResetAfter (an hour) disconnected;
//   - topic rules of the form SELECT * FROM '<filter>' [WHERE <condition>
//     [AND <condition>]...] with startswith(<attribute>, '<literal>'), = and
//     <> on string attributes, whose action is a Go function;
//   - the data plane's POST /topics/{topic}?qos=N and DELETE /connections/{clientId};
//   - token signing of an authorizer (Config.Signing: TokenKeyName and
//     TokenSigningPublicKeys): a CONNECT whose token signature is missing or
//     does not verify is refused before the authorizer's function, which is
//     never invoked for it;
//   - the message broker's size limits, and metering as IoT Core bills it
//     (Usage).
//
// It does not model: X.509 or SigV4 authentication (the data plane accepts any
// request, like the emulator), policy variables and
// Condition blocks, persistent sessions beyond what mochi keeps, retained
// message limits, QoS 2 (mochi downgrades it to 1; IoT Core supports 0 and 1
// only and would not acknowledge it), throttling, the rules engine's other
// SQL, its error action and ordering, or Basic Ingest.
package iotcore
