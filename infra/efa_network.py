"""EfaNetwork: a VPC ready for HyperPod GPU pools that exchange KV cache over EFA, or an adopted one."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, cast

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from hyperpod_dpd.catalogue.zones import zone_kind
from hyperpod_dpd.config.network import CreateVpc, ExistingSubnet, ExistingVpc
from hyperpod_dpd.errors import ConfigError
from hyperpod_dpd.infra import guardrails, source_conditions
from hyperpod_dpd.infra.arns import arn

if TYPE_CHECKING:
    from hyperpod_dpd.infra.checks_role import ChecksRole

# FSx for Lustre client ports (https://docs.aws.amazon.com/fsx/latest/LustreGuide/limit-access-security-groups.html).
LUSTRE_PORTS: tuple[tuple[int, int], ...] = ((988, 988), (1018, 1023))
INTERNAL_ELB_TAG = "kubernetes.io/role/internal-elb"
ELB_TAG = "kubernetes.io/role/elb"


class EfaNetwork(Construct):
    """VPC, subnets and the EFA security group of one environment.

    Created VPC: a public and an EKS private subnet per AZ, NAT, an S3 gateway endpoint, VPC flow logs, and one
    large private subnet for the GPU pools in ``gpu_availability_zone``, carved from a secondary CIDR block because
    every pod takes a VPC IP. The EFA security group admits traffic only from itself (EFA needs self-referencing
    ingress *and* egress) plus the FSx for Lustre ports, and allows all egress.

    ``gpu_availability_zone`` is a zone name (``us-west-2a``) or an AZ ID (``usw2-az2``). With an ID the created GPU
    subnet carries ``AvailabilityZoneId`` instead of ``AvailabilityZone`` (AWS::EC2::Subnet takes one or the other:
    cfn-lint 1.58.0's registry schema, ``dependentExcluded``; both are create-only, so switching between the name and
    the ID of the same zone replaces the subnet), and its route goes through the NAT gateway of the first zone of
    ``create.availability_zones``, since which name the ID has is the account's (``hpdpd preflight`` says whether
    that is the GPU zone).

    Attributes: ``vpc``, ``eks_subnets`` (control plane and system nodes), ``gpu_subnet``, ``efa_security_group``,
    ``gpu_availability_zone_name`` (the GPU subnet's zone name: with an ID, the deploy-time
    ``Fn::GetAtt <GpuSubnet>.AvailabilityZone``), ``checks_role`` (the pipeline's checks role when
    :func:`hyperpod_dpd.infra.platform.build_network` made one), ``connections`` (the EFA security group as
    ``ec2.Connections``).

    Args:
        gpu_availability_zone: the GPU subnet's zone, a name or an AZ ID (the configuration's
            ``network.gpu_availability_zone``). No default.
        create: the VPC to create (``CreateVpc``); exactly one of ``create`` and ``existing``. Default: None.
        existing: the VPC to adopt (``ExistingVpc``); with a zone name, its GPU subnet must be in that zone (every
            instance group runs there). Default: None.
        flow_log_retention: how long the created VPC's flow logs are kept. Default: one year.
        removal_policy: of the flow log group and its key. Default: DESTROY.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        gpu_availability_zone: str,
        create: CreateVpc | None = None,
        existing: ExistingVpc | None = None,
        flow_log_retention: logs.RetentionDays = logs.RetentionDays.ONE_YEAR,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.DESTROY,
    ) -> None:
        if (create is None) == (existing is None):
            given = [name for name, value in (("create", create), ("existing", existing)) if value is not None]
            raise ConfigError.single(None, "EfaNetwork", given, "pass exactly one of 'create' or 'existing'")
        kind = zone_kind(gpu_availability_zone)
        if kind is None:
            raise ConfigError.single(None, "EfaNetwork.gpu_availability_zone", gpu_availability_zone,
                                     "must be an Availability Zone name such as 'us-west-2a' or an AZ ID such as "
                                     "'usw2-az2'")
        if create is not None and kind == "name" and gpu_availability_zone not in create.availability_zones:
            raise ConfigError.single(None, "EfaNetwork.gpu_availability_zone", gpu_availability_zone,
                                     f"must be one of {list(create.availability_zones)}")
        if existing is not None and kind == "name" and existing.gpu_subnet.availability_zone != gpu_availability_zone:
            # every instance group runs in the GPU subnet (infra/hyperpod_cluster.py), so the GPU zone is its zone
            raise ConfigError.single(None, "EfaNetwork.existing.gpu_subnet.availability_zone",
                                     existing.gpu_subnet.availability_zone,
                                     f"must be gpu_availability_zone ({gpu_availability_zone}): the HyperPod groups "
                                     "run in the GPU subnet, in the zone of their capacity")
        super().__init__(scope, id)
        self.gpu_availability_zone = gpu_availability_zone
        self.gpu_zone_is_id = kind == "id"
        self.gpu_availability_zone_name: str = gpu_availability_zone
        # The pipeline's checks role, when infra.platform.build_network creates one next to the network.
        self.checks_role: ChecksRole | None = None
        if create is not None:
            self._create(create, flow_log_retention, removal_policy)
        else:
            assert existing is not None
            self._adopt(existing)

    # -- created VPC ---------------------------------------------------------------------------------------------

    def _create(self, props: CreateVpc, retention: logs.RetentionDays, removal_policy: cdk.RemovalPolicy) -> None:
        flow_logs: dict[str, ec2.FlowLogOptions] = {}
        if props.flow_logs:
            key = kms.Key(self, "FlowLogsKey", enable_key_rotation=True, removal_policy=removal_policy,
                          description="Encrypts the VPC flow logs of the HyperPod network")
            stack = cdk.Stack.of(self)
            key.add_to_resource_policy(iam.PolicyStatement(
                sid="CloudWatchLogsUse", principals=[iam.ServicePrincipal(f"logs.{stack.region}.amazonaws.com")],
                actions=["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"],
                resources=["*"],  # a key policy's resource is the key itself
                conditions={"ArnLike": {"kms:EncryptionContext:aws:logs:arn":
                                        arn(self, "logs", "log-group:*")}}))
            group = logs.LogGroup(self, "FlowLogs", retention=retention, removal_policy=removal_policy, encryption_key=key)
            flow_logs["All"] = ec2.FlowLogOptions(
                destination=ec2.FlowLogDestination.to_cloud_watch_logs(group), traffic_type=ec2.FlowLogTrafficType.ALL)
        # The GPU AZ goes first so that the first NAT gateway, which the GPU subnet uses, sits in the same AZ. An AZ ID
        # names no zone of this list: the zones keep their order, and the first one's NAT gateway serves the GPU subnet.
        zones = list(props.availability_zones) if self.gpu_zone_is_id else (
            [self.gpu_availability_zone] + [z for z in props.availability_zones if z != self.gpu_availability_zone])
        vpc = ec2.Vpc(
            self, "Resource",
            ip_addresses=ec2.IpAddresses.cidr(props.cidr),
            availability_zones=zones,
            nat_gateways=props.nat_gateways,
            restrict_default_security_group=True,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=props.public_subnet_mask,
                                        map_public_ip_on_launch=False),
                ec2.SubnetConfiguration(name="eks", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS,
                                        cidr_mask=props.private_subnet_mask),
            ],
            flow_logs=flow_logs,
        )
        if flow_logs:  # the role aws-cdk-lib creates for the flow log: bound to this account's flow logs
            role = cast(ec2.FlowLog, vpc.node.find_child("All")).iam_role
            assert role is not None  # a CloudWatch Logs destination always has one
            source_conditions.bind_trust(role, "vpc-flow-logs.amazonaws.com", source_conditions.flow_logs(self))
        self.vpc: ec2.IVpc = vpc
        self.eks_subnets: list[ec2.ISubnet] = list(vpc.private_subnets)
        self.public_subnets: list[ec2.ISubnet] = list(vpc.public_subnets)
        for subnet in vpc.public_subnets:
            cdk.Tags.of(subnet).add(ELB_TAG, "1")
        for subnet in vpc.private_subnets:
            cdk.Tags.of(subnet).add(INTERNAL_ELB_TAG, "1")

        cidr = ec2.CfnVPCCidrBlock(self, "GpuCidrBlock", vpc_id=vpc.vpc_id, cidr_block=props.gpu_subnet_cidr)
        gpu = ec2.PrivateSubnet(self, "GpuSubnet", availability_zone=self.gpu_availability_zone, vpc_id=vpc.vpc_id,
                                cidr_block=props.gpu_subnet_cidr, map_public_ip_on_launch=False)
        gpu.node.add_dependency(cidr)
        if self.gpu_zone_is_id:
            placed = cast(ec2.CfnSubnet, gpu.node.default_child)
            placed.availability_zone = None  # one or the other (the subnet schema's dependentExcluded)
            placed.availability_zone_id = self.gpu_availability_zone
            self.gpu_availability_zone_name = placed.attr_availability_zone  # the name, once the subnet exists
        cdk.Tags.of(gpu).add("Name", f"{cdk.Names.unique_id(vpc)}/gpu")
        cdk.Tags.of(gpu).add(INTERNAL_ELB_TAG, "1")
        gpu.add_default_nat_route(self._nat_gateway_id(vpc))
        self.gpu_subnet: ec2.ISubnet = gpu

        vpc.add_gateway_endpoint(
            "S3Endpoint", service=ec2.GatewayVpcEndpointAwsService.S3,
            subnets=[ec2.SubnetSelection(subnets=[*vpc.private_subnets, gpu])])
        self.efa_security_group: ec2.ISecurityGroup = self._efa_security_group(vpc)
        provider = cdk.Stack.of(self).node.try_find_child("Custom::VpcRestrictDefaultSGCustomResourceProvider")
        if provider is not None:
            guardrails.acknowledge(provider, "HPDPD-IAM1", "aws-cdk-lib's provider that empties the default security "
                                   "group writes ARNs with the partition of the stack's Region")

    @property
    def connections(self) -> ec2.Connections:
        """The EFA security group as ``ec2.Connections``, as aws-cdk's own constructs expose theirs. Once a HyperPod
        cluster uses the group, rule HPDPD-HP3 refuses any ingress from outside it (EFA traffic stays among its
        members): reach the nodes through the EKS cluster security group (``HyperPodDpdPlatform.connections``). An
        adopted group (``existing.efa_security_group_id``) is imported immutable: aws-cdk adds no rule to it."""
        return ec2.Connections(security_groups=[self.efa_security_group])

    def _nat_gateway_id(self, vpc: ec2.Vpc) -> str:
        """The NAT gateway in the GPU AZ (the first public subnet, see the AZ order above); with an AZ ID, the first."""
        for subnet in [] if self.gpu_zone_is_id else vpc.public_subnets:
            nat = subnet.node.try_find_child("NATGateway")
            if nat is not None and subnet.availability_zone == self.gpu_availability_zone:
                return nat.ref  # type: ignore[attr-defined]
        first = vpc.public_subnets[0].node.find_child("NATGateway")
        return first.ref  # type: ignore[attr-defined]

    def _efa_security_group(self, vpc: ec2.IVpc) -> ec2.SecurityGroup:
        group = ec2.SecurityGroup(
            self, "EfaSecurityGroup", vpc=vpc, allow_all_outbound=True,
            description="HyperPod EFA: all traffic within the group (EFA, NCCL, NIXL), FSx Lustre, egress to anywhere",
        )
        group.add_ingress_rule(group, ec2.Port.all_traffic(), "EFA and node traffic from members of this group")
        for low, high in LUSTRE_PORTS:
            group.add_ingress_rule(group, ec2.Port.tcp_range(low, high) if low != high else ec2.Port.tcp(low),
                                   f"FSx for Lustre {low}-{high} from members of this group")
        # EFA needs an explicit self-referencing egress rule next to egress to anywhere (AWS APIs, ECR, models);
        # the L2 skips egress rules once all outbound is allowed, so this one is an L1.
        ec2.CfnSecurityGroupEgress(
            self, "EfaSelfEgress", group_id=group.security_group_id, ip_protocol="-1",
            destination_security_group_id=group.security_group_id, description="EFA traffic to members of this group")
        return group

    # -- adopted VPC ---------------------------------------------------------------------------------------------

    def _adopt(self, props: ExistingVpc) -> None:
        private = sorted(props.private_subnets, key=lambda s: s.availability_zone)
        zones = [s.availability_zone for s in private]
        self.vpc = ec2.Vpc.from_vpc_attributes(
            self, "Resource", vpc_id=props.vpc_id, vpc_cidr_block=props.cidr, availability_zones=zones,
            private_subnet_ids=[s.subnet_id for s in private],
            private_subnet_route_table_ids=_route_tables(private),
        )
        self.eks_subnets = list(self.vpc.private_subnets)
        self.public_subnets = [
            ec2.Subnet.from_subnet_attributes(self, f"Public{i}", subnet_id=s.subnet_id, availability_zone=s.availability_zone)
            for i, s in enumerate(props.public_subnets)
        ]
        self.gpu_subnet = ec2.Subnet.from_subnet_attributes(
            self, "GpuSubnet", subnet_id=props.gpu_subnet.subnet_id,
            availability_zone=props.gpu_subnet.availability_zone, route_table_id=props.gpu_subnet.route_table_id)
        self.gpu_availability_zone_name = props.gpu_subnet.availability_zone  # an adopted subnet's name is configured
        if props.efa_security_group_id:
            self.efa_security_group = ec2.SecurityGroup.from_security_group_id(
                self, "EfaSecurityGroup", props.efa_security_group_id, allow_all_outbound=True, mutable=False)
        else:
            self.efa_security_group = self._efa_security_group(self.vpc)


def _route_tables(subnets: Sequence[ExistingSubnet]) -> list[str] | None:
    tables = [s.route_table_id for s in subnets]
    return [t for t in tables if t] if all(tables) else None
