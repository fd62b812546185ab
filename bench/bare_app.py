"""The baseline of the synth benchmark: per environment, just a VPC, an aws_eks_v2 cluster and a two-group
HyperPod cluster, written the shortest way. ``bench/synth.sh`` compares ``make synth`` against it."""

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk.lambda_layer_kubectl_v35 import KubectlV35Layer

from hyperpod_dpd.config import load_all
from hyperpod_dpd.infra.platform import availability_zone_context

environments = load_all()
app = cdk.App(context=availability_zone_context(*environments))  # as the project's app: no AZ lookups
for env in environments:
    stack = cdk.Stack(app, f"bare-{env.name}", env=cdk.Environment(account=env.account, region=env.region))
    vpc = ec2.Vpc(stack, "Vpc", availability_zones=list(env.network.availability_zones), nat_gateways=1)
    cluster = eks.Cluster(stack, "Eks", vpc=vpc, version=eks.KubernetesVersion.of(env.eks.version),
                          default_capacity_type=eks.DefaultCapacityType.NODEGROUP, default_capacity=0,
                          kubectl_provider_options=eks.KubectlProviderOptions(kubectl_layer=KubectlV35Layer(stack, "Kubectl")))
    role = iam.Role(stack, "Exec", assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com"))
    gpu = [g for g in env.hyperpod.instance_groups if g.is_gpu][:2]
    hyperpod = sagemaker.CfnCluster(
        stack, "HyperPod", cluster_name=env.hyperpod.cluster_name,
        orchestrator=sagemaker.CfnCluster.OrchestratorProperty(
            eks=sagemaker.CfnCluster.ClusterOrchestratorEksConfigProperty(cluster_arn=cluster.cluster_arn)),
        vpc_config=sagemaker.CfnCluster.VpcConfigProperty(security_group_ids=[cluster.cluster_security_group_id],
                                                          subnets=[vpc.private_subnets[0].subnet_id]),
        instance_groups=[sagemaker.CfnCluster.ClusterInstanceGroupProperty(
            instance_group_name=g.name, instance_type=g.instance_type, instance_count=g.count,
            execution_role=role.role_arn) for g in gpu])
    # the same E3644 acknowledgment the toolkit makes for types the bundled validator does not know yet
    cdk.Validations.of(hyperpod).acknowledge(cdk.Acknowledgment(id="CloudFormation-Validate::E3644", reason="baseline"))
app.synth()
