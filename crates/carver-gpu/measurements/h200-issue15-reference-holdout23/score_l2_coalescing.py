import json,glob,os,math,sys
d='/tmp/r23/ref23'
def key(c): return json.dumps(c,sort_keys=True)
rows=[]
for f in sorted(glob.glob(d+'/*.json')):
    name=os.path.basename(f)[:-5]
    ref=json.load(open(f))['results'][0]
    rt={key(c['config']):c['measured_time_us'] for c in ref['candidates'] if c.get('measured_time_us')}
    base=[c for c in ref['candidates'] if c['model_rank'] and c['model_rank']<=8]
    base.sort(key=lambda c:c['model_rank'])
    bt=[rt.get(key(c['config'])) for c in base]
    cf=d+'/c2/'+name+'.json'
    if os.path.exists(cf):
        c2=json.load(open(cf))['results'][0]['candidates']
        c2.sort(key=lambda c:c['model_rank'])
        ct=[rt.get(key(c['config'])) or c.get('measured_time_us') for c in c2[:8]]
        extra=[c['measured_time_us'] for c in c2 if c.get('measured_time_us')]
    else:
        ct=bt; extra=[]
    best=min(list(rt.values())+(extra if len(sys.argv)<2 else []))
    rows.append((name,best/bt[0],best/min(t for t in bt if t),best/ct[0],best/min(t for t in ct if t)))
g=lambda xs: math.exp(sum(math.log(x) for x in xs)/len(xs))
for r in rows: print('%-28s base %.3f %.3f   c2 %.3f %.3f'%r)
for i,l in ((1,'base top1'),(2,'base bo8'),(3,'c2 top1'),(4,'c2 bo8')):
    xs=[r[i] for r in rows]; print(l, round(g(xs),3), 'worst', round(min(xs),3))
print('--- c2 picks not in the reference (timed only by the c2 tune)')
for f in sorted(glob.glob(d+'/c2/*.json')):
    name=os.path.basename(f)[:-5]
    ref=json.load(open(d+'/'+name+'.json'))['results'][0]
    rt={key(c['config']) for c in ref['candidates'] if c.get('measured_time_us')}
    c2=sorted(json.load(open(f))['results'][0]['candidates'],key=lambda c:c['model_rank'])[:8]
    miss=[c['model_rank'] for c in c2 if key(c['config']) not in rt]
    print(name, 'missing ranks', miss)
