import json, collections, aws_cdk as cdk, os, cfnlint
from aws_cdk import aws_sagemaker as sm
from hpdpd.catalogue import INSTANCE_TYPES, HYPERPOD_REGIONS
types=list(INSTANCE_TYPES)
app = cdk.App(outdir='/tmp/probeout2', context={"@aws-cdk/core:validateAgainstDefaultRules": False})
for r in sorted(HYPERPOD_REGIONS):
    s = cdk.Stack(app, 'S'+r.replace('-',''), env=cdk.Environment(account='111111111111', region=r))
    for i,t in enumerate(types):
        sm.CfnCluster(s, f'C{i}', cluster_name=f'c{i}', instance_groups=[sm.CfnCluster.ClusterInstanceGroupProperty(instance_group_name='g', instance_type=t, instance_count=1, execution_role='arn:aws:iam::111111111111:role/x')])
try: app.synth()
except Exception as e: pass
rep = json.load(open('/tmp/probeout2/validation-report.json'))
bad=set()
for pr in rep['pluginReports']:
    for v in pr['violations']:
        for c in v['violatingConstructs']:
            st,cid=c['constructPath'].split('/')[:2]
            bad.add((types[int(cid[1:])], c['cloudFormationResource']['templatePath']))
regmap={'S'+r.replace('-',''):r for r in HYPERPOD_REGIONS}
cdkbad=collections.defaultdict(set)
for t,tp in bad: cdkbad[t].add(regmap[tp.split('.')[0]])
cl=json.load(open(os.path.join(os.path.dirname(cfnlint.__file__),'data/schemas/extensions/aws_sagemaker_cluster/instancetype_enum.json')))
out={}
for t in types:
    lint={r for r in HYPERPOD_REGIONS if t in cl.get(r,{}).get('enum',[])}
    cdkok=set(HYPERPOD_REGIONS)-cdkbad[t]
    out[t]={'cfnlint':sorted(lint),'cdk':sorted(cdkok)}
json.dump(out,open('/tmp/regions.json','w'),indent=1)
for t,v in out.items(): print(t, len(v['cfnlint']), len(v['cdk']), sorted(set(v['cdk'])-set(v['cfnlint'])), sorted(set(v['cfnlint'])-set(v['cdk'])))
