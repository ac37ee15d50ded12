"""Transform template.yaml as a deploy would, without an AWS account.

Usage: python3 infra/sam/check.py TEMPLATE ARTIFACTS_DIR OUT_JSON

ARTIFACTS_DIR holds one folder per function, named by its logical id, as
the Makefile's build-<LogicalId> targets filled it (what `sam build` calls,
https://docs.aws.amazon.com/serverless-application-model/latest/developerguide/building-custom-runtimes.html).
Each function must have its `bootstrap` there. Its CodeUri becomes the S3
object `sam package` would upload (the folder zipped, keyed by the zip's
MD5), the SAM translator (the samtranslator package, the one `sam deploy`
and cfn-lint use) transforms the template, and the CloudFormation template
is written to OUT_JSON for cfn-lint. Then the transformed template is
checked for what SAM generates and template.yaml cannot show: every
trigger, schedule, function URL and HTTP API integration invokes a
function's alias (no caller reaches an unpublished $LATEST past the
gradual deployment), every alias has a CodeDeploy deployment group with
alarms, and a public function URL has both permissions AWS requires.

The translator needs a managed policy map only for SAM Policies naming AWS
managed policies; the template gives every function a role of its own, so
the map is empty and a policy name would fail the transform.
"""

import hashlib
import io
import json
import logging
import os
import sys
import zipfile

from samtranslator.translator.transform import transform
from samtranslator.yaml_helper import yaml_parse


class NoManagedPolicies:
    """A ManagedPolicyLoader that knows no policy (nothing asks for one)."""

    def load(self):
        return {}


def package(folder):
    """The zip `sam package` would upload for a built function, and its key."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for root, _, files in sorted(os.walk(folder)):
            for name in sorted(files):
                path = os.path.join(root, name)
                info = zipfile.ZipInfo(os.path.relpath(path, folder), date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = (os.stat(path).st_mode & 0o777) << 16
                with open(path, "rb") as f:
                    z.writestr(info, f.read(), zipfile.ZIP_DEFLATED)
    return hashlib.md5(buf.getvalue()).hexdigest()


def targets_alias(v, aliases):
    """Whether v (a Ref, GetAtt or Sub) names one of the aliases."""
    text = json.dumps(v)
    return any(a in text for a in aliases)


def public_url_permissions(url_id, url, rs):
    """A function URL whose AuthType is NONE answers 403 unless the
    function's resource policy lets anyone both invoke its URL and invoke
    it through the URL: function URLs created since October 2025 need
    lambda:InvokeFunctionUrl and lambda:InvokeFunction
    (https://docs.aws.amazon.com/lambda/latest/dg/urls-auth.html)."""
    if url.get("AuthType") != "NONE":
        return []
    granted = set()
    for r in rs.values():
        p = r.get("Properties", {})
        if r["Type"] != "AWS::Lambda::Permission" or p.get("Principal") != "*":
            continue
        if p.get("FunctionName") != url["TargetFunctionArn"]:
            continue
        if p.get("Action") == "lambda:InvokeFunctionUrl" and p.get("FunctionUrlAuthType") == "NONE":
            granted.add("lambda:InvokeFunctionUrl")
        if p.get("Action") == "lambda:InvokeFunction" and p.get("InvokedViaFunctionUrl") is True:
            granted.add("lambda:InvokeFunction")
    return [f"{url_id}: public function URL without a public {a} permission on {url['TargetFunctionArn']}"
            for a in ("lambda:InvokeFunctionUrl", "lambda:InvokeFunction") if a not in granted]


def main(template, artifacts, out):
    with open(template) as f:
        sam = yaml_parse(f.read())
    problems = []
    for fid, res in sam["Resources"].items():
        if res.get("Type") != "AWS::Serverless::Function":
            continue
        built = os.path.join(artifacts, fid)
        boot = os.path.join(built, "bootstrap")
        if not os.access(boot, os.X_OK):
            problems.append(f"{fid}: no executable {boot} (make build-{fid} ARTIFACTS_DIR={built})")
            continue
        res["Properties"]["CodeUri"] = {"Bucket": "spaces-artifacts", "Key": package(built)}
    if problems:
        sys.exit("\n".join(problems))

    # The region only fills AWS::Region and the partition of generated
    # ARNs; no AWS call is made.
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    logging.disable(logging.WARNING)  # the translator's feature-toggle notices
    cfn = transform(sam, {}, NoManagedPolicies())
    with open(out, "w") as f:
        json.dump(cfn, f, indent=1, sort_keys=True)

    rs = cfn["Resources"]
    aliases = {i for i, r in rs.items() if r["Type"] == "AWS::Lambda::Alias"}
    functions = {i for i, r in rs.items() if r["Type"] == "AWS::Lambda::Function"}
    for fn in functions:
        if not any(rs[a]["Properties"]["FunctionName"] == {"Ref": fn} for a in aliases):
            problems.append(f"{fn}: no alias")
    groups = [r for r in rs.values() if r["Type"] == "AWS::CodeDeploy::DeploymentGroup"]
    for a in aliases:
        policy = rs[a].get("UpdatePolicy", {}).get("CodeDeployLambdaAliasUpdate")
        if not policy:
            problems.append(f"{a}: no CodeDeploy update policy (gradual deployment)")
    for g in groups:
        if not g["Properties"].get("AlarmConfiguration", {}).get("Alarms"):
            problems.append(f"deployment group {g['Properties']}: no alarms to roll back on")
    if len(groups) != len(functions):
        problems.append(f"{len(groups)} deployment groups for {len(functions)} functions")
    callers = 0
    for i, r in rs.items():
        p = r.get("Properties", {})
        if r["Type"] in ("AWS::Lambda::EventSourceMapping", "AWS::Scheduler::Schedule", "AWS::Lambda::Permission"):
            callers += 1
        if r["Type"] == "AWS::Lambda::EventSourceMapping" and not targets_alias(p["FunctionName"], aliases):
            problems.append(f"{i}: the trigger invokes {p['FunctionName']}, not an alias")
        if r["Type"] == "AWS::Scheduler::Schedule" and not targets_alias(p["Target"]["Arn"], aliases):
            problems.append(f"{i}: the schedule invokes {p['Target']['Arn']}, not an alias")
        if r["Type"] == "AWS::Lambda::Permission" and not targets_alias(p["FunctionName"], aliases):
            problems.append(f"{i}: permits invoking {p['FunctionName']}, not an alias")
        if r["Type"] == "AWS::ApiGatewayV2::Api":
            for path, ops in p["Body"]["paths"].items():
                for method, op in ops.items():
                    uri = op.get("x-amazon-apigateway-integration", {}).get("uri")
                    if uri is not None:
                        callers += 1
                    if uri is not None and not targets_alias(uri, aliases):
                        problems.append(f"{method.upper()} {path}: integrates {uri}, not an alias")
        if r["Type"] == "AWS::Lambda::Url":
            callers += 1
            if not targets_alias(p["TargetFunctionArn"], aliases):
                problems.append(f"{i}: the function URL invokes {p['TargetFunctionArn']}, not an alias")
            problems += public_url_permissions(i, p, rs)
        if r["Type"] == "AWS::Lambda::Function":
            for k, v in p.get("Environment", {}).get("Variables", {}).items():
                if k.endswith("_FUNCTION") and not targets_alias(v, aliases):
                    problems.append(f"{i}: {k} = {v}, not an alias")
    if problems:
        sys.exit("\n".join(problems))
    print(f"{template}: {len(functions)} functions built and packaged, transformed into {len(rs)} resources ({out}); all {callers} triggers, schedules, permissions, function URLs and routes invoke an alias")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    main(*sys.argv[1:])
