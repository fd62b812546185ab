"""IAM statements for the inference stack's controllers, written least-privilege with partition-aware ARNs.

Each function returns the statements one controller needs, scoped by resource ARN or by the tags the controller
puts on what it creates. An action is on ``*`` only where the Service Authorization Reference lists no resource type
for it (its machine-readable form, as cfn-lint 1.58.0 ships it in ``cfnlint/data/AdditionalSpecs/Policies.json``),
or where the resource IAM authorizes it on is not known (``shield:DescribeProtection``, called with the load
balancer's ARN; KEDA's CloudWatch metric reads, whose only resource type is the optional ``dataset``); an action that
takes no resource type is never scoped to an ARN, which would grant nothing (tests/infra/test_iam_scope.py holds both).
"""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_iam as iam
from constructs import IConstruct

from hyperpod_dpd.infra.arns import arn, iam_arn

_CLUSTER_TAG = "elbv2.k8s.aws/cluster"  # what the controller stamps on everything it creates


def load_balancer_controller(scope: IConstruct) -> list[iam.PolicyStatement]:
    """The AWS Load Balancer Controller bundled in the inference add-on: it manages ALBs/NLBs and their security
    groups, and may touch only what it tagged as its own (``elbv2.k8s.aws/cluster``).

    Statement for statement AWS's policy for this controller (aws/sagemaker-hyperpod-cluster-setup @ a9933ba,
    ``eks/cloudformation/inference-addon-iam-roles-template.yaml``, ``AlbControllerPolicy``; the controller's own
    ``iam_policy.json`` has the same statements), with ``*`` resources narrowed to the resource types each action
    authorizes on, in this account and Region. The tag conditions are AWS's: the cluster tag is required when
    creating, may be stamped only by the creating call, and may not be added to or removed from an existing resource.
    """
    elb = lambda resource: arn(scope, "elasticloadbalancing", resource)  # noqa: E731
    ec2 = lambda resource: arn(scope, "ec2", resource)  # noqa: E731
    own = {"Null": {f"aws:ResourceTag/{_CLUSTER_TAG}": "false"}}
    creating_own = {"Null": {f"aws:RequestTag/{_CLUSTER_TAG}": "false"}}
    # tags other than the cluster tag, on resources that carry it (AWS: "Null": RequestTag true, ResourceTag false)
    retag_own = {"Null": {f"aws:RequestTag/{_CLUSTER_TAG}": "true", f"aws:ResourceTag/{_CLUSTER_TAG}": "false"}}
    balancers = [elb("loadbalancer/app/*/*"), elb("loadbalancer/net/*/*")]
    target_groups = [elb("targetgroup/*/*")]
    listeners = [elb("listener/app/*/*/*"), elb("listener/net/*/*/*")]
    rules = [elb("listener-rule/app/*/*/*"), elb("listener-rule/net/*/*/*")]
    web_acls = [arn(scope, "wafv2", "regional/webacl/*/*"), arn(scope, "waf-regional", "webacl/*")]
    return [
        # Actions the Service Authorization Reference lists without a resource type; and shield:DescribeProtection,
        # which the controller calls with the load balancer's ARN (ResourceArn), not a protection's
        iam.PolicyStatement(sid="Discover", actions=[
            "ec2:DescribeAccountAttributes", "ec2:DescribeAddresses", "ec2:DescribeAvailabilityZones",
            "ec2:DescribeInternetGateways", "ec2:DescribeVpcs", "ec2:DescribeVpcPeeringConnections",
            "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups", "ec2:DescribeInstances",
            "ec2:DescribeNetworkInterfaces", "ec2:DescribeTags", "ec2:DescribeCoipPools",
            "ec2:DescribeRouteTables", "ec2:DescribeIpamPools",
            "elasticloadbalancing:DescribeLoadBalancers", "elasticloadbalancing:DescribeLoadBalancerAttributes",
            "elasticloadbalancing:DescribeListeners", "elasticloadbalancing:DescribeListenerAttributes",
            "elasticloadbalancing:DescribeListenerCertificates", "elasticloadbalancing:DescribeSSLPolicies",
            "elasticloadbalancing:DescribeRules", "elasticloadbalancing:DescribeTargetGroups",
            "elasticloadbalancing:DescribeTargetGroupAttributes", "elasticloadbalancing:DescribeTargetHealth",
            "elasticloadbalancing:DescribeTags", "elasticloadbalancing:DescribeTrustStores",
            "elasticloadbalancing:DescribeCapacityReservation",
            "acm:ListCertificates", "iam:ListServerCertificates",
            "shield:GetSubscriptionState", "shield:DescribeProtection"], resources=["*"]),
        # The reads of AWS's Discover statement that take a resource (Service Authorization Reference: ec2 "vpc" and
        # "coip-pool", acm "certificate", iam "server-certificate", cognito-idp "userpool", wafv2 and waf-regional
        # "webacl", GetWebACLForResource the load balancer), each on that resource type in this account and Region
        iam.PolicyStatement(sid="DiscoverNetwork", actions=["ec2:GetSecurityGroupsForVpc", "ec2:GetCoipPoolUsage"],
                            resources=[ec2("vpc/*"), ec2("coip-pool/*")]),
        iam.PolicyStatement(sid="ReadListenerCertificates",
                            actions=["acm:DescribeCertificate", "iam:GetServerCertificate"],
                            resources=[arn(scope, "acm", "certificate/*"), iam_arn(scope, "server-certificate/*")]),
        iam.PolicyStatement(sid="ReadUserPoolClients", actions=["cognito-idp:DescribeUserPoolClient"],
                            resources=[arn(scope, "cognito-idp", "userpool/*")]),
        iam.PolicyStatement(sid="ReadFirewalls", actions=[
            "wafv2:GetWebACL", "wafv2:GetWebACLForResource", "waf-regional:GetWebACL",
            "waf-regional:GetWebACLForResource"], resources=[*web_acls, elb("loadbalancer/app/*/*")]),
        iam.PolicyStatement(sid="ElbServiceLinkedRole", actions=["iam:CreateServiceLinkedRole"],
                            resources=[iam_arn(scope, "role/aws-service-role/elasticloadbalancing.amazonaws.com/*")],
                            conditions={"StringEquals": {"iam:AWSServiceName": "elasticloadbalancing.amazonaws.com"}}),
        # WAF and Shield Advanced on the controller's ALBs, when an Ingress asks for them by annotation
        iam.PolicyStatement(sid="AssociateFirewalls", actions=[
            "wafv2:AssociateWebACL", "wafv2:DisassociateWebACL",
            "waf-regional:AssociateWebACL", "waf-regional:DisassociateWebACL"],
            resources=[*web_acls, elb("loadbalancer/app/*/*")]),
        # elasticloadbalancing:SetWebAcl and shield:CreateProtection take no resource type (Service Authorization
        # Reference), so, as in AWS's policy, they are on "*": on an ARN they would grant nothing
        iam.PolicyStatement(sid="ProtectLoadBalancers",
                            actions=["elasticloadbalancing:SetWebAcl", "shield:CreateProtection"], resources=["*"]),
        iam.PolicyStatement(sid="ShieldProtections", actions=["shield:DeleteProtection"],
                            resources=[arn(scope, "shield", "protection/*", region="")]),
        iam.PolicyStatement(sid="CreateOwnSecurityGroups", actions=["ec2:CreateSecurityGroup"],
                            resources=[ec2("security-group/*"), ec2("vpc/*")]),
        iam.PolicyStatement(sid="TagOwnNewSecurityGroups", actions=["ec2:CreateTags"],
                            resources=[ec2("security-group/*")],
                            conditions={"StringEquals": {"ec2:CreateAction": "CreateSecurityGroup"}, **creating_own}),
        iam.PolicyStatement(sid="RetagOwnSecurityGroups", actions=["ec2:CreateTags", "ec2:DeleteTags"],
                            resources=[ec2("security-group/*")], conditions=retag_own),
        iam.PolicyStatement(sid="ManageOwnSecurityGroups", actions=[
            "ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress", "ec2:DeleteSecurityGroup"],
            resources=[ec2("security-group/*")], conditions=own),
        iam.PolicyStatement(sid="OpenNodeSecurityGroupsToLoadBalancers", actions=[
            "ec2:AuthorizeSecurityGroupIngress", "ec2:RevokeSecurityGroupIngress"],
            resources=[ec2("security-group/*")]),
        iam.PolicyStatement(sid="CreateTaggedLoadBalancers", actions=[
            "elasticloadbalancing:CreateLoadBalancer", "elasticloadbalancing:CreateTargetGroup"],
            resources=[*balancers, *target_groups], conditions=creating_own),
        iam.PolicyStatement(sid="ManageListenersAndRules", actions=[
            "elasticloadbalancing:CreateListener", "elasticloadbalancing:DeleteListener",
            "elasticloadbalancing:CreateRule", "elasticloadbalancing:DeleteRule"],
            resources=[*balancers, *listeners, *rules]),
        iam.PolicyStatement(sid="RetagOwnLoadBalancers", actions=[
            "elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags"],
            resources=[*target_groups, *balancers], conditions=retag_own),
        # The controller tags the listeners and rules it creates; AWS's policy puts no condition here.
        iam.PolicyStatement(sid="TagListenersAndRules", actions=[
            "elasticloadbalancing:AddTags", "elasticloadbalancing:RemoveTags"],
            resources=[*listeners, *rules]),
        iam.PolicyStatement(sid="ManageOwnLoadBalancers", actions=[
            "elasticloadbalancing:ModifyLoadBalancerAttributes", "elasticloadbalancing:SetIpAddressType",
            "elasticloadbalancing:SetSecurityGroups", "elasticloadbalancing:SetSubnets",
            "elasticloadbalancing:DeleteLoadBalancer", "elasticloadbalancing:ModifyTargetGroup",
            "elasticloadbalancing:ModifyTargetGroupAttributes", "elasticloadbalancing:DeleteTargetGroup",
            "elasticloadbalancing:ModifyListenerAttributes", "elasticloadbalancing:ModifyCapacityReservation",
            "elasticloadbalancing:ModifyIpPools"],
            resources=[*balancers, *target_groups, *listeners], conditions=own),
        iam.PolicyStatement(sid="TagOwnNewLoadBalancers", actions=["elasticloadbalancing:AddTags"],
                            resources=[*target_groups, *balancers],
                            conditions={"StringEquals": {"elasticloadbalancing:CreateAction": [
                                "CreateTargetGroup", "CreateLoadBalancer"]}, **creating_own}),
        iam.PolicyStatement(sid="RegisterTargets", actions=[
            "elasticloadbalancing:RegisterTargets", "elasticloadbalancing:DeregisterTargets"],
            resources=target_groups),
        iam.PolicyStatement(sid="ConfigureListenersAndRules", actions=[
            "elasticloadbalancing:ModifyListener",
            "elasticloadbalancing:AddListenerCertificates", "elasticloadbalancing:RemoveListenerCertificates",
            "elasticloadbalancing:ModifyRule", "elasticloadbalancing:SetRulePriorities"],
            resources=[*balancers, *listeners, *rules]),
    ]


def keda_operator(scope: IConstruct) -> list[iam.PolicyStatement]:
    """KEDA reads the CloudWatch and Amazon Managed Prometheus metrics that drive per-role autoscaling.

    AWS's ``KedaPolicy`` (inference-addon-iam-roles-template.yaml @ a9933ba) grants the same actions on ``*``; the
    Prometheus queries here are limited to workspaces of this account and Region.
    """
    return [
        iam.PolicyStatement(sid="ReadCloudWatchMetrics", actions=[
            "cloudwatch:GetMetricData", "cloudwatch:GetMetricStatistics", "cloudwatch:ListMetrics"], resources=["*"]),
        iam.PolicyStatement(sid="QueryPrometheus", actions=[
            "aps:QueryMetrics", "aps:GetLabels", "aps:GetSeries", "aps:GetMetricMetadata"],
            resources=[arn(scope, "aps", "workspace/*")]),
    ]


def s3_model_reader(bucket_arns: Sequence[str]) -> list[iam.PolicyStatement]:
    """Mountpoint for S3 mounts model weights read-only, so the CSI role may list and read the model buckets only.

    AWS's ``S3MountpointPolicy`` (inference-addon-iam-roles-template.yaml @ a9933ba) allows ``s3:ListBucket`` on
    every bucket and ``GetObject``/``PutObject``/``AbortMultipartUpload``/``DeleteObject`` on every object; the
    toolkit mounts model buckets read-only, so it keeps the read half on the model buckets.
    """
    if not bucket_arns:
        return []
    return [
        iam.PolicyStatement(sid="ListModelBuckets", actions=["s3:ListBucket"], resources=list(bucket_arns)),
        iam.PolicyStatement(sid="ReadModelObjects", actions=["s3:GetObject"], resources=[f"{b}/*" for b in bucket_arns]),
    ]


def fsx_csi_controller(scope: IConstruct, bucket_arns: Sequence[str] = ()) -> list[iam.PolicyStatement]:
    """The FSx for Lustre CSI controller: mount existing file systems and manage the ones it provisions.

    AWS's template attaches ``AmazonFSxFullAccess``; the driver's own minimal policy (kubernetes-sigs/aws-fsx-csi-driver
    ``docs/install.md``) is what this follows: the FSx and S3-data-repository service-linked roles, ``s3:ListBucket``
    (for file systems linked to a bucket, here the model buckets) and the FSx calls, scoped to this account and Region.
    """
    statements = [
        iam.PolicyStatement(sid="DescribeFileSystems", actions=["fsx:DescribeFileSystems"], resources=["*"]),
        iam.PolicyStatement(sid="ManageFileSystems", actions=[
            "fsx:CreateFileSystem", "fsx:DeleteFileSystem", "fsx:UpdateFileSystem", "fsx:TagResource"],
            resources=[arn(scope, "fsx", "file-system/*")]),
        iam.PolicyStatement(sid="FsxServiceLinkedRole", actions=["iam:CreateServiceLinkedRole"],
                            resources=[iam_arn(scope, "role/aws-service-role/fsx.amazonaws.com/*")],
                            conditions={"StringEquals": {"iam:AWSServiceName": "fsx.amazonaws.com"}}),
        iam.PolicyStatement(sid="FsxS3DataRepositoryRole", actions=[
            "iam:CreateServiceLinkedRole", "iam:AttachRolePolicy", "iam:PutRolePolicy"],
            resources=[iam_arn(scope, "role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/*")]),
    ]
    if bucket_arns:
        statements.append(iam.PolicyStatement(sid="ListLinkedBuckets", actions=["s3:ListBucket"],
                                              resources=list(bucket_arns)))
    return statements


# CloudWatch Logs of the observability collector (AWS's HyperPodObservabilityAddonRole, CloudwatchLogsAccess):
# HyperPod's log groups only.
OBSERVABILITY_LOG_ACTIONS = (
    "logs:CreateLogGroup", "logs:CreateLogStream", "logs:DescribeLogGroups", "logs:DescribeLogStreams",
    "logs:PutLogEvents", "logs:GetLogEvents", "logs:FilterLogEvents", "logs:GetLogRecord", "logs:StartQuery",
    "logs:StopQuery", "logs:GetQueryResults")


def observability_collector(scope: IConstruct, workspace_arn: str) -> list[iam.PolicyStatement]:
    """The observability add-on's OpenTelemetry collector: remote-write to one Prometheus workspace, HyperPod logs.

    As AWS's ``HyperPodObservabilityAddonRole`` (aws/sagemaker-hyperpod-cluster-setup @ 14144a4,
    ``eks/cloudformation/observability-template.yaml``): ``aps:RemoteWrite`` on the workspace and the CloudWatch Logs
    actions on ``/aws/sagemaker/Clusters/*``.
    """
    return [
        iam.PolicyStatement(sid="RemoteWriteMetrics", actions=["aps:RemoteWrite"], resources=[workspace_arn]),
        iam.PolicyStatement(sid="WriteClusterLogs", actions=list(OBSERVABILITY_LOG_ACTIONS),
                            resources=[arn(scope, "logs", "log-group:/aws/sagemaker/Clusters/*"),
                                       arn(scope, "logs", "log-group:/aws/sagemaker/Clusters/*:log-stream:*")]),
    ]


def grafana_reader(workspace_arn: str) -> list[iam.PolicyStatement]:
    """The Amazon Managed Grafana workspace's data-source role: read the one Prometheus workspace.

    AWS's ``GrafanaWorkspaceRole`` (observability-template.yaml @ 14144a4) reads every workspace
    (``AllowListWorkspacesFromPrometheus``, ``AllowReadingMetricsFromPrometheus``, ``AllowReadingAlertsFromPrometheus``);
    this one reads the workspace the collector writes to. Its CloudWatch, Logs, EC2 and tag reads serve other data
    sources and are left out.
    """
    return [
        iam.PolicyStatement(sid="ListPrometheusWorkspaces", actions=["aps:ListWorkspaces"], resources=["*"]),
        iam.PolicyStatement(sid="QueryPrometheus", actions=[
            "aps:DescribeWorkspace", "aps:QueryMetrics", "aps:GetLabels", "aps:GetSeries", "aps:GetMetricMetadata"],
            resources=[workspace_arn]),
        iam.PolicyStatement(sid="ReadPrometheusAlerts", actions=[
            "aps:ListRules", "aps:ListAlertManagerSilences", "aps:ListAlertManagerAlerts", "aps:GetAlertManagerStatus",
            "aps:ListAlertManagerAlertGroups", "aps:PutAlertManagerSilences", "aps:DeleteAlertManagerSilence"],
            resources=[workspace_arn]),
    ]


# Why each statement above needs a wildcard (action or resource), by statement id. ``InferenceOperator`` uses
# these to acknowledge the matching cdk-nag findings; a statement with a wildcard but no entry fails synthesis.
WILDCARD_REASONS: dict[str, str] = {
    "Discover": "Describe/List/Get calls of EC2, ELB, ACM, IAM and Shield that take no resource type (Service "
                "Authorization Reference); shield:DescribeProtection is called with the load balancer's ARN",
    "DiscoverNetwork": "The VPCs and customer-owned IP pools the controller looks up; scoped to this account and Region",
    "ReadListenerCertificates": "The ACM or IAM certificate an Ingress names; scoped to this account (and Region)",
    "ReadUserPoolClients": "The Cognito user pool an Ingress authenticates with; scoped to this account and Region",
    "ReadFirewalls": "The web ACL an Ingress names and the controller's ALBs; scoped to this account and Region",
    "ProtectLoadBalancers": "elasticloadbalancing:SetWebAcl and shield:CreateProtection take no resource type "
                            "(Service Authorization Reference)",
    "ElbServiceLinkedRole": "The ELB service-linked role name is fixed by AWS but its path segment is a wildcard",
    "AssociateFirewalls": "The web ACL is named per Ingress annotation and the ALB id is generated; scoped to this "
                          "account and Region",
    "ShieldProtections": "Shield protections get ids at creation; scoped to this account",
    "CreateOwnSecurityGroups": "The controller creates load-balancer security groups whose ids are not known in advance",
    "TagOwnNewSecurityGroups": "Tags only security groups being created with the controller's cluster tag",
    "RetagOwnSecurityGroups": "Limited by condition to security groups carrying the cluster tag, which it may not change",
    "ManageOwnSecurityGroups": "Limited by condition to security groups carrying the controller's cluster tag",
    "OpenNodeSecurityGroupsToLoadBalancers": "The controller opens node security groups to its load balancers; "
                                             "their ids are not known in advance",
    "CreateTaggedLoadBalancers": "Limited by condition to load balancers and target groups created with the cluster tag",
    "ManageListenersAndRules": "Listener and rule ARNs embed ids generated when the controller creates them",
    "RetagOwnLoadBalancers": "Limited by condition to load balancers and target groups carrying the cluster tag, which "
                             "it may not change",
    "TagListenersAndRules": "The controller tags the listeners and rules it creates; their ARNs embed generated ids",
    "ManageOwnLoadBalancers": "Limited by condition to load balancers, target groups and listeners carrying the cluster tag",
    "TagOwnNewLoadBalancers": "Limited by condition to load balancers and target groups being created with the cluster tag",
    "RegisterTargets": "Target group ARNs embed ids generated when the controller creates them",
    "ConfigureListenersAndRules": "Listener and rule ARNs embed ids generated when the controller creates them",
    "ReadCloudWatchMetrics": "CloudWatch metric reads support no resource-level permissions",
    "QueryPrometheus": "The Prometheus workspace of a trigger is named per endpoint, in this account and Region",
    "ReadModelObjects": "Model weights are many objects under prefixes of the model buckets",
    "DescribeFileSystems": "fsx:DescribeFileSystems supports no resource-level permissions",
    "ManageFileSystems": "File systems the CSI driver provisions get ids at creation; scoped to this account and Region",
    "FsxServiceLinkedRole": "The FSx service-linked role name is fixed by AWS but its path segment is a wildcard",
    "FsxS3DataRepositoryRole": "The service-linked role of an S3-linked file system is named per file system",
    "ReadWriteTlsCertificates": "The operator writes one certificate object per endpoint into the TLS bucket",
    "ReadCustomCertificates": "Custom endpoint certificates are chosen per endpoint (tlsConfig.customCertificateConfig)",
    "WriteClusterLogs": "HyperPod log groups are created per cluster under /aws/sagemaker/Clusters/",
    "ListPrometheusWorkspaces": "aps:ListWorkspaces supports no resource-level permissions",
}
