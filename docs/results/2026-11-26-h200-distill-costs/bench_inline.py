import torch,time,json,mar_official as mo,distill_head as dh
from make_random_packs import randomise
torch.set_default_device('cuda')
def T(f,r=3):
 f();torch.cuda.synchronize();t=time.time()
 for _ in range(r):f()
 torch.cuda.synchronize();return (time.time()-t)/r
for n in ['mar_base','mar_large','mar_huge']:
 m=mo.build_mar(mo.MAR_PRESETS[n]);randomise(m,torch.Generator('cuda').manual_seed(0))
 for p in m.parameters():p.requires_grad_(False)
 L,D=m.seq_len,m.token_dim;W=m.class_emb.weight.shape[1];o={'model':n,'gpu':torch.cuda.get_device_name()}
 for b in [8,64]:
  tk=torch.randn(b,L,D);mk=(torch.rand(b,L)<.5).float();c=torch.randint(0,1000,(b,))
  with torch.no_grad():o[f'pass_b{b}_ms']=1e3*T(lambda:m.forward_keep(tk,mk,c,torch.zeros(b)))
 te=dh.Teacher(m.diffloss.net)
 for r in [1024,16384]:
  z=torch.randn(r,W);x=torch.randn(r,D);w=torch.full((r,),2.)
  o[f'ode_r{r}_ms']=1e3*T(lambda:te.run(z,z,w,x),2)
 s=dh.DistilledHead(D,W,160,3).cuda();e=dh.DistilledHead(D,W,160,3).cuda();op=torch.optim.AdamW(s.parameters())
 xs=torch.randn(512,D);ts=torch.full((512,),999.);zs=torch.randn(512,W);cf=torch.full((512,),2.);y=torch.randn(512,D)
 def u():
  l=((s(xs,ts,zs,zs,cf)-y)**2).mean();op.zero_grad();l.backward();op.step();dh.ema_update(e,s,100,.999)
 o['update_b512_ms']=1e3*T(u,20);print(json.dumps({k:(round(v,2) if isinstance(v,float) else v) for k,v in o.items()}),flush=True)
 del m;torch.cuda.empty_cache()
