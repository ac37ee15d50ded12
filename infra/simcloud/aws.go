package simcloud

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"spaces/shared/space"
)

const stsNS = "https://sts.amazonaws.com/doc/2011-06-15/"

// presignedLifetime is how long STS honours a presigned GetCallerIdentity,
// whatever its X-Amz-Expires says (the EKS authenticator relies on it).
const presignedLifetime = 15 * time.Minute

type awsCaller struct {
	accessKey string
	region    string
	service   string
	session   *session // nil for the runtime's own credentials
}

// roleARN is the role the caller's session assumed, "" for the runtime.
func (a awsCaller) roleARN() string {
	if a.session == nil {
		return ""
	}
	return a.session.roleARN
}

func accountOf(roleARN string) string {
	// arn:aws:iam::<account>:role/<name>
	parts := strings.SplitN(roleARN, ":", 6)
	if len(parts) < 6 {
		return ""
	}
	return parts[4]
}

// secretFor returns the secret and session of an access key id.
func (c *Cloud) secretFor(akid string) (string, *session, bool) {
	if akid == RuntimeAccessKeyID {
		return RuntimeSecretAccessKey, nil, true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.sessions[akid]
	if !ok {
		return "", nil, false
	}
	return s.secret, &s, true
}

// verifyHeaderSigned checks a request signed with an Authorization header
// by recomputing the signature with the caller's secret.
func (c *Cloud) verifyHeaderSigned(r *http.Request, body []byte) (awsCaller, error) {
	auth := r.Header.Get("Authorization")
	const alg = "AWS4-HMAC-SHA256 "
	if !strings.HasPrefix(auth, alg) {
		return awsCaller{}, errors.New("request is not signed with SigV4")
	}
	fields := map[string]string{}
	for _, f := range strings.Split(auth[len(alg):], ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		fields[k] = v
	}
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 {
		return awsCaller{}, errors.New("malformed credential scope")
	}
	akid, region, service := scope[0], scope[2], scope[3]
	secret, sess, ok := c.secretFor(akid)
	if !ok {
		return awsCaller{}, errInvalidToken
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return awsCaller{}, errors.New("missing or bad X-Amz-Date")
	}
	if d := c.opts.Now().Sub(at); d > 5*time.Minute || d < -5*time.Minute {
		return awsCaller{}, errors.New("signature expired: request time too skewed")
	}
	if sess != nil {
		if r.Header.Get("X-Amz-Security-Token") != sess.token {
			return awsCaller{}, errInvalidToken
		}
		if !c.opts.Now().Before(sess.expires) {
			return awsCaller{}, errExpiredToken
		}
	}
	// Rebuild the request with only the signed headers and sign it again.
	re, _ := http.NewRequest(r.Method, "https://"+r.Host+r.URL.RequestURI(), bytes.NewReader(body))
	for _, h := range strings.Split(fields["SignedHeaders"], ";") {
		if h == "host" {
			continue
		}
		if v, ok := r.Header[http.CanonicalHeaderKey(h)]; ok {
			re.Header[http.CanonicalHeaderKey(h)] = v
		}
	}
	re.ContentLength = int64(len(body))
	sum := sha256.Sum256(body)
	payload := hex.EncodeToString(sum[:])
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" {
		payload = h
	}
	creds := aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret}
	if sess != nil {
		creds.SessionToken = sess.token
	}
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, re, payload, service, region, at); err != nil {
		return awsCaller{}, err
	}
	want := signatureOf(re.Header.Get("Authorization"))
	if !hmac.Equal([]byte(want), []byte(fields["Signature"])) {
		return awsCaller{}, errSignature
	}
	return awsCaller{accessKey: akid, region: region, service: service, session: sess}, nil
}

// verifyPresigned checks a presigned URL's signature. The x-k8s-aws-id
// header, when signed, must come with the request.
func (c *Cloud) verifyPresigned(r *http.Request) (awsCaller, error) {
	q := r.URL.Query()
	if q.Get("X-Amz-Algorithm") != "AWS4-HMAC-SHA256" {
		return awsCaller{}, errors.New("request is not presigned with SigV4")
	}
	scope := strings.Split(q.Get("X-Amz-Credential"), "/")
	if len(scope) != 5 {
		return awsCaller{}, errors.New("malformed credential scope")
	}
	akid, region, service := scope[0], scope[2], scope[3]
	secret, sess, ok := c.secretFor(akid)
	if !ok {
		return awsCaller{}, errInvalidToken
	}
	at, err := time.Parse("20060102T150405Z", q.Get("X-Amz-Date"))
	if err != nil {
		return awsCaller{}, errors.New("missing or bad X-Amz-Date")
	}
	now := c.opts.Now()
	if now.Sub(at) > presignedLifetime || at.Sub(now) > 5*time.Minute {
		return awsCaller{}, errors.New("the presigned request has expired")
	}
	if sess != nil {
		if q.Get("X-Amz-Security-Token") != sess.token {
			return awsCaller{}, errInvalidToken
		}
		if !now.Before(sess.expires) {
			return awsCaller{}, errExpiredToken
		}
	}
	given := q.Get("X-Amz-Signature")
	rest := url.Values{}
	for k, v := range q {
		switch k {
		case "X-Amz-Algorithm", "X-Amz-Credential", "X-Amz-Date", "X-Amz-SignedHeaders", "X-Amz-Signature", "X-Amz-Security-Token":
		default:
			rest[k] = v
		}
	}
	u := *r.URL
	u.Scheme, u.Host, u.RawQuery = "https", r.Host, rest.Encode()
	re, _ := http.NewRequest(r.Method, u.String(), nil)
	for _, h := range strings.Split(q.Get("X-Amz-SignedHeaders"), ";") {
		if h == "host" {
			continue
		}
		v, ok := r.Header[http.CanonicalHeaderKey(h)]
		if !ok {
			return awsCaller{}, fmt.Errorf("signed header %s is missing", h)
		}
		re.Header[http.CanonicalHeaderKey(h)] = v
	}
	creds := aws.Credentials{AccessKeyID: akid, SecretAccessKey: secret}
	if sess != nil {
		creds.SessionToken = sess.token
	}
	sum := sha256.Sum256(nil)
	signed, _, err := v4.NewSigner().PresignHTTP(context.Background(), creds, re, hex.EncodeToString(sum[:]), service, region, at)
	if err != nil {
		return awsCaller{}, err
	}
	su, err := url.Parse(signed)
	if err != nil {
		return awsCaller{}, err
	}
	if !hmac.Equal([]byte(su.Query().Get("X-Amz-Signature")), []byte(given)) {
		return awsCaller{}, errSignature
	}
	return awsCaller{accessKey: akid, region: region, service: service, session: sess}, nil
}

// AWS's own messages, word for word: the SDK shows them to the caller.
var (
	//lint:ignore ST1005 AWS's message.
	errInvalidToken = errors.New("The security token included in the request is invalid.")
	//lint:ignore ST1005 AWS's message.
	errExpiredToken = errors.New("The security token included in the request is expired")
	//lint:ignore ST1005 AWS's message.
	errSignature = errors.New("The request signature we calculated does not match the signature you provided.")
)

func signatureOf(auth string) string {
	_, sig, _ := strings.Cut(auth, "Signature=")
	return sig
}

func awsAuthCode(err error) string {
	switch {
	case errors.Is(err, errInvalidToken):
		return "InvalidClientTokenId"
	case errors.Is(err, errExpiredToken):
		return "ExpiredToken"
	case errors.Is(err, errSignature):
		return "SignatureDoesNotMatch"
	}
	return "AccessDenied"
}

// sts serves the STS query protocol: form POSTs and presigned GETs.
func (c *Cloud) sts(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	var form url.Values
	var caller awsCaller
	var err error
	if r.Method == http.MethodGet {
		form = r.URL.Query()
	} else {
		form, _ = url.ParseQuery(string(body))
	}
	action := form.Get("Action")
	if fail := c.count("sts:" + action); fail != 0 {
		stsError(w, fail, "ServiceUnavailable", "simulated failure")
		return
	}
	if r.Method == http.MethodGet {
		caller, err = c.verifyPresigned(r)
	} else {
		caller, err = c.verifyHeaderSigned(r, body)
	}
	if err != nil {
		stsError(w, http.StatusForbidden, awsAuthCode(err), err.Error())
		return
	}
	switch action {
	case "AssumeRole":
		c.assumeRole(w, form, caller)
	case "GetWebIdentityToken":
		c.webIdentityToken(w, form, caller)
	case "GetCallerIdentity":
		arn, account, user := "arn:aws:iam::"+"000000000000"+":user/spaces-runtime", "000000000000", "AIDASIMCLOUDRUNTIME"
		if s := caller.session; s != nil {
			account = accountOf(s.roleARN)
			name := s.roleARN[strings.LastIndex(s.roleARN, "/")+1:]
			arn = "arn:aws:sts::" + account + ":assumed-role/" + name + "/" + s.sessionName
			user = "AROASIMCLOUD:" + s.sessionName
		}
		writeXML(w, http.StatusOK, getCallerIdentityResponse{Xmlns: stsNS,
			Result: callerIdentity{Arn: arn, UserID: user, Account: account}, RequestID: randomHex(8)})
	default:
		stsError(w, http.StatusBadRequest, "InvalidAction", "Could not find operation "+action)
	}
}

func (c *Cloud) assumeRole(w http.ResponseWriter, form url.Values, caller awsCaller) {
	roleARN, ext, name := form.Get("RoleArn"), form.Get("ExternalId"), form.Get("RoleSessionName")
	_, hasExt := form["ExternalId"]
	c.mu.Lock()
	tp, known := c.roles[roleARN]
	c.mu.Unlock()
	if caller.session != nil || !known || !tp.allows(RuntimeARN, ext, hasExt) || name == "" {
		stsError(w, http.StatusForbidden, "AccessDenied", fmt.Sprintf(
			"User: arn:aws:iam::000000000000:user/spaces-runtime is not authorized to perform: sts:AssumeRole on resource: %s", roleARN))
		return
	}
	dur := c.opts.SessionLifetime
	if s := form.Get("DurationSeconds"); s != "" {
		var n int
		if _, err := fmt.Sscan(s, &n); err == nil && n >= 900 && time.Duration(n)*time.Second < dur {
			dur = time.Duration(n) * time.Second
		}
	}
	s := session{secret: randomHex(20), token: "simsession." + randomHex(32), roleARN: roleARN, sessionName: name,
		expires: c.opts.Now().Add(dur).UTC().Truncate(time.Second)}
	akid := "ASIASIM" + strings.ToUpper(randomHex(7))
	c.mu.Lock()
	c.sessions[akid] = s
	c.mu.Unlock()
	role := roleARN[strings.LastIndex(roleARN, "/")+1:]
	writeXML(w, http.StatusOK, assumeRoleResponse{Xmlns: stsNS, Result: assumeRoleResult{
		Credentials: stsCredentials{AccessKeyID: akid, SecretAccessKey: s.secret, SessionToken: s.token,
			Expiration: s.expires.Format(time.RFC3339)},
		AssumedRoleUser: assumedRoleUser{Arn: "arn:aws:sts::" + accountOf(roleARN) + ":assumed-role/" + role + "/" + name,
			AssumedRoleID: "AROASIMCLOUD:" + name},
	}, RequestID: randomHex(8)})
}

type assumeRoleResponse struct {
	XMLName   xml.Name         `xml:"AssumeRoleResponse"`
	Xmlns     string           `xml:"xmlns,attr"`
	Result    assumeRoleResult `xml:"AssumeRoleResult"`
	RequestID string           `xml:"ResponseMetadata>RequestId"`
}

type assumeRoleResult struct {
	Credentials     stsCredentials  `xml:"Credentials"`
	AssumedRoleUser assumedRoleUser `xml:"AssumedRoleUser"`
}

type stsCredentials struct {
	AccessKeyID     string `xml:"AccessKeyId"`
	SecretAccessKey string `xml:"SecretAccessKey"`
	SessionToken    string `xml:"SessionToken"`
	Expiration      string `xml:"Expiration"`
}

type assumedRoleUser struct {
	Arn           string `xml:"Arn"`
	AssumedRoleID string `xml:"AssumedRoleId"`
}

type getCallerIdentityResponse struct {
	XMLName   xml.Name       `xml:"GetCallerIdentityResponse"`
	Xmlns     string         `xml:"xmlns,attr"`
	Result    callerIdentity `xml:"GetCallerIdentityResult"`
	RequestID string         `xml:"ResponseMetadata>RequestId"`
}

type callerIdentity struct {
	Arn     string `xml:"Arn"`
	UserID  string `xml:"UserId"`
	Account string `xml:"Account"`
}

type stsErrorResponse struct {
	XMLName   xml.Name `xml:"ErrorResponse"`
	Type      string   `xml:"Error>Type"`
	Code      string   `xml:"Error>Code"`
	Message   string   `xml:"Error>Message"`
	RequestID string   `xml:"RequestId"`
}

func stsError(w http.ResponseWriter, status int, code, msg string) {
	typ := "Sender"
	if status >= 500 {
		typ = "Receiver"
	}
	writeXML(w, status, stsErrorResponse{Type: typ, Code: code, Message: msg, RequestID: randomHex(8)})
}

func writeXML(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_ = xml.NewEncoder(w).Encode(v)
}

// eksCaller authenticates an EKS call; only assumed-role sessions may call.
// It returns the body, which the signature covers.
func (c *Cloud) eksCaller(w http.ResponseWriter, r *http.Request, op string) (awsCaller, []byte, bool) {
	if fail := c.count("eks:" + op); fail != 0 {
		eksError(w, fail, "ServiceUnavailableException", "simulated failure")
		return awsCaller{}, nil, false
	}
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	caller, err := c.verifyHeaderSigned(r, body)
	if err != nil {
		code := awsAuthCode(err)
		if code == "AccessDenied" {
			code = "AccessDeniedException"
		}
		eksError(w, http.StatusForbidden, code, err.Error())
		return awsCaller{}, nil, false
	}
	if caller.service != "eks" {
		eksError(w, http.StatusForbidden, "InvalidSignatureException", "credential scope is not eks")
		return awsCaller{}, nil, false
	}
	return caller, body, true
}

func (c *Cloud) eksDescribe(w http.ResponseWriter, r *http.Request) {
	caller, _, ok := c.eksCaller(w, r, "DescribeCluster")
	if !ok {
		return
	}
	name := r.PathValue("name")
	acct := accountOf(caller.roleARN())
	cl := c.findCluster(func(cl *Cluster) bool {
		return cl.Provider == space.AWS && cl.Name == name && cl.Location == caller.region && cl.Account == acct
	})
	if cl == nil {
		eksError(w, http.StatusNotFound, "ResourceNotFoundException", "No cluster found for name: "+name+".")
		return
	}
	if !cl.grants(caller.roleARN()) {
		eksError(w, http.StatusForbidden, "AccessDeniedException", fmt.Sprintf(
			"User: %s is not authorized to perform: eks:DescribeCluster on resource: %s", caller.roleARN(), eksARN(cl)))
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"cluster": c.eksCluster(cl)})
}

func eksARN(cl *Cluster) string {
	return "arn:aws:eks:" + cl.Location + ":" + cl.Account + ":cluster/" + cl.Name
}

func (c *Cloud) eksCluster(cl *Cluster) map[string]any {
	out := map[string]any{
		"name": cl.Name, "arn": eksARN(cl), "endpoint": cl.Server, "status": "ACTIVE", "version": cl.version(),
		"certificateAuthority": map[string]string{"data": base64.StdEncoding.EncodeToString(cl.CAPEM)},
		"createdAt":            1.7e9,
	}
	if m := cl.made; m != nil {
		out["version"], out["tags"] = m.version, m.tags
		out["resourcesVpcConfig"] = map[string]any{"subnetIds": m.subnets}
		if !c.active(cl) {
			// No endpoint or CA until the control plane is up.
			out["status"] = "CREATING"
			delete(out, "endpoint")
			delete(out, "certificateAuthority")
		}
	}
	return out
}

func (c *Cloud) eksList(w http.ResponseWriter, r *http.Request) {
	caller, _, ok := c.eksCaller(w, r, "ListClusters")
	if !ok {
		return
	}
	acct := accountOf(caller.roleARN())
	names := []string{}
	for _, cl := range c.listClusters(func(cl *Cluster) bool {
		return cl.Provider == space.AWS && cl.Location == caller.region && cl.Account == acct && cl.grants(caller.roleARN())
	}) {
		names = append(names, cl.Name)
	}
	writeJSON(w, http.StatusOK, map[string]any{"clusters": names})
}

func eksError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("X-Amzn-Errortype", code)
	writeJSON(w, status, map[string]string{"message": msg})
}

// trustPolicy is a role's trust policy: the statements that allow
// sts:AssumeRole.
type trustPolicy []trustStatement

type trustStatement struct {
	principals  []string
	externalIDs []string // the sts:ExternalId condition; none: no condition
}

// allows evaluates the policy as IAM does for AssumeRole: some statement
// names the caller (its ARN, its account's root or its account id) and,
// if it has an sts:ExternalId condition, the request carries a matching
// external id.
func (tp trustPolicy) allows(caller, ext string, hasExt bool) bool {
	acct := accountOf(caller)
	for _, st := range tp {
		named := false
		for _, p := range st.principals {
			named = named || p == caller || p == "arn:aws:iam::"+acct+":root" || p == acct
		}
		if !named {
			continue
		}
		if len(st.externalIDs) == 0 {
			return true
		}
		for _, id := range st.externalIDs {
			if hasExt && id == ext {
				return true
			}
		}
	}
	return false
}

// parseTrustPolicy reads an IAM trust policy document. Only what Spaces'
// setup uses is understood (Allow, AWS principals, sts:AssumeRole,
// StringEquals sts:ExternalId); anything else is refused, as a stricter
// IAM would, rather than silently trusted.
func parseTrustPolicy(doc []byte) (trustPolicy, error) {
	var d struct {
		Statement []struct {
			Effect    string
			Principal struct{ AWS stringList }
			Action    stringList
			Condition map[string]map[string]stringList
		}
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("MalformedPolicyDocument: %w", err)
	}
	var tp trustPolicy
	for _, st := range d.Statement {
		if st.Effect != "Allow" || !slices.Contains(st.Action, "sts:AssumeRole") {
			continue
		}
		ts := trustStatement{principals: st.Principal.AWS}
		for op, keys := range st.Condition {
			for k, v := range keys {
				if op != "StringEquals" || !strings.EqualFold(k, "sts:ExternalId") {
					return nil, fmt.Errorf("MalformedPolicyDocument: condition %s %s is not supported here", op, k)
				}
				ts.externalIDs = append(ts.externalIDs, v...)
			}
		}
		tp = append(tp, ts)
	}
	return tp, nil
}

// stringList is an IAM policy value: one string or a list of them.
type stringList []string

func (l *stringList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*l = []string{one}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(l))
}

// webIdentityToken is sts:GetWebIdentityToken: a token naming the caller
// (sub) for the audience asked for, which Entra checks against an app's
// federated credentials.
func (c *Cloud) webIdentityToken(w http.ResponseWriter, form url.Values, caller awsCaller) {
	aud := form.Get("Audience.member.1")
	if aud == "" {
		stsError(w, http.StatusBadRequest, "ValidationError", "Audience is required")
		return
	}
	sub := RuntimeARN
	if caller.session != nil {
		sub = caller.session.roleARN
	}
	tok := "awsjwt." + randomHex(24)
	exp := c.opts.Now().Add(5 * time.Minute).UTC().Truncate(time.Second)
	c.mu.Lock()
	c.assert[tok] = webToken{FederatedCredential: FederatedCredential{Issuer: c.AWSIssuer(), Subject: sub, Audience: aud}, expires: exp}
	c.mu.Unlock()
	writeXML(w, http.StatusOK, webIdentityTokenResponse{Xmlns: stsNS, Result: webIdentityTokenResult{
		WebIdentityToken: tok, Expiration: exp.Format(time.RFC3339)}, RequestID: randomHex(8)})
}

type webIdentityTokenResponse struct {
	XMLName   xml.Name               `xml:"GetWebIdentityTokenResponse"`
	Xmlns     string                 `xml:"xmlns,attr"`
	Result    webIdentityTokenResult `xml:"GetWebIdentityTokenResult"`
	RequestID string                 `xml:"ResponseMetadata>RequestId"`
}

type webIdentityTokenResult struct {
	WebIdentityToken string `xml:"WebIdentityToken"`
	Expiration       string `xml:"Expiration"`
}
