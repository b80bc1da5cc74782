#!/usr/bin/env python3
"""PyTorch-eager baseline: Piper's own VITS model (piper-tts 1.8.0) on the voice talker speaks with.

What a user who does not have talker's CUDA engine would run instead: `SynthesizerTrn.infer()` from
the training code that the PyPI `piper-tts` 1.8.0 wheel ships (`piper/train/vits/`, GPL-3.0 like
talker), with the weights of the voice's .onnx file, in eager PyTorch.

  check  the module against ONNX Runtime (CPU, batch 1, noise off) on the held-out sentences:
         durations identical and waveform SNR; FP32 at batch 1 is gated (>= --min-snr, 40 dB), the
         other modes and batches are reported. Exits 1 when the FP32 gate fails.
  bench  throughput (audio-seconds per second) per mode (see Modes) at each batch
         size, batches formed as talker forms them (scripts/gpu-reference.py `batches`: sorted
         into the length buckets of tts::batch::DEFAULT_EDGES, a batch never spans two buckets, at
         most N items; "64" is the renderer's buckets, about 25 items a call on these sentences).
         One untimed warm-up pass, then the median of --passes timed passes; audio is brought
         back to the host in every call. JSON on stdout.

Piper's code runs as shipped: eager, except its one @torch.jit.script helper
(commons.fused_add_tanh_sigmoid_multiply, the WN gate); the SDP draws its (zero-scaled) noise on the
CPU and copies it over, as Piper does.

Modes: fp32 = strict FP32 (cuDNN and matmul TF32 off); fp16 = torch.autocast(float16) over the
whole infer() (PyTorch's own mixed precision: the text encoder and duration predictor in FP16 too,
so durations differ from ONNX Runtime's); fp16-flowdec = autocast(float16) over the flow and the
decoder only, text encoder and duration predictor in strict FP32 (talker's own precision policy:
durations as ONNX Runtime's); tf32 = PyTorch's default settings (cuDNN convolutions in TF32).
--cudnn-benchmark sets torch.backends.cudnn.benchmark (off by default, as in PyTorch).

The wheel is not installed (its package `piper` imports ONNX Runtime and a compiled espeak bridge at
import): `piper/train/vits/` is imported straight from the wheel file through zipimport as the
package `piper_vits`; its modules need only torch and numpy. Wheel: --wheel, or
.whl/piper_tts-1.8.0-*.whl in the repository (a folder that git ignores).

Hyperparameters: num_symbols / num_speakers from the .onnx.json (absent: from the graph); everything else from the ONNX
initialisers' shapes and the graph's Conv/ConvTranspose attributes (see `hyperparameters`).

Weights: the ONNX initialisers, name by name (see `onnx_to_state` and `load_model`):
  - most initialisers carry the module path of the parameter (`dec.ups.0.weight`, ...): copied;
  - `sid` [n_vocab, hidden] is `enc_p.emb.weight` (the exporter renamed it: its consumer is
    /enc_p/emb/Gather; the sqrt(hidden) scale stays in the graph as /enc_p/Mul, not folded);
  - `onnx::Conv_<n>` are the flow's WN convolutions (`flow.flows.{0,2,4,6}.enc.in_layers.{i}` and
    `.res_skip_layers.{i}`) with weight norm folded in (g * v / |v|, constant-folded by the export):
    named after the Conv node that consumes them; loaded into the module after its weight norm
    has been removed (as `dec` has its weight norm removed, exactly as Piper's export does);
  - `/dp/flows.0/Exp_output_0` [2, 1] is exp(-logs) of the duration predictor's ElementwiseAffine
    (the reverse pass computes (x - m) * exp(-logs); the export folded Neg+Exp): logs = -ln(value);
  - not in the graph (never used by infer()): enc_q.* (posterior encoder), dp.post_* and dp.flows.1
    (the SDP's "useless vflow", dropped in reverse) -- they keep their random initialisation.
Every parameter infer() needs is loaded, and every initialiser that is a parameter is used; the
script refuses to run otherwise.
"""
import argparse
import glob
import importlib.util
import json
import math
import os
import re
import statistics
import sys
import time
import types
import warnings

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ beside scripts/gpu-reference.py
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
HOP = 256


def gpu_reference():
    """scripts/gpu-reference.py as a module: the ids, batching, ONNX Runtime reference and SNR."""
    spec = importlib.util.spec_from_file_location("gpu_reference", os.path.join(HERE, "gpu-reference.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


REF = gpu_reference()


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- the module

def find_wheel(path):
    if path:
        return path
    found = sorted(glob.glob(os.path.join(ROOT, ".whl", "piper_tts-1.8.0-*.whl")))
    if not found:
        sys.exit("no piper-tts wheel: pass --wheel, or put piper_tts-1.8.0-*.whl in .whl/ "
                 "(pip download --no-deps piper-tts==1.8.0 -d .whl)")
    return found[0]


def import_vits(wheel):
    """piper/train/vits from the wheel as package `piper_vits` (zipimport; no piper/__init__)."""
    pkg = types.ModuleType("piper_vits")
    pkg.__path__ = [os.path.join(os.path.abspath(wheel), "piper", "train", "vits")]
    pkg.__package__ = "piper_vits"
    sys.modules["piper_vits"] = pkg
    import importlib
    return importlib.import_module("piper_vits.models")


class Onnx:
    """The voice's initialisers (numpy) and Conv-like nodes."""

    def __init__(self, model_path):
        import onnx
        from onnx import numpy_helper
        m = onnx.load(model_path)
        self.inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
        self.consumers = {}
        self.convs = {}  # node name -> (op, {attr: value}, inputs)
        for n in m.graph.node:
            for i in n.input:
                self.consumers.setdefault(i, []).append(n)
            if n.op_type in ("Conv", "ConvTranspose"):
                attrs = {a.name: list(a.ints) for a in n.attribute if a.ints}
                self.convs[n.name] = (n.op_type, attrs, list(n.input))

    def attr(self, node, name):
        return self.convs[node][1][name]


def hyperparameters(onnx_model, config):
    w = onnx_model.inits
    n_layers = len({k.split(".")[3] for k in w if k.startswith("enc_p.encoder.attn_layers.")})
    emb = w["sid"]
    hidden = emb.shape[1]
    rel = w["enc_p.encoder.attn_layers.0.emb_rel_k"]  # [heads_rel, 2*window+1, k_channels]
    window = (rel.shape[1] - 1) // 2
    assert window == 4, f"relative window {window}: attentions.Encoder fixes 4"
    n_ups = len({k for k in w if re.fullmatch(r"dec\.ups\.\d+\.weight", k)})
    ups = [w[f"dec.ups.{i}.weight"] for i in range(n_ups)]  # [in, out, k]
    rates = [onnx_model.attr(f"/dec/ups.{i}/ConvTranspose", "strides")[0] for i in range(n_ups)]
    n_res = len({k.split(".")[2] for k in w if k.startswith("dec.resblocks.")})
    per_stage = n_res // n_ups
    resblock = "2" if "dec.resblocks.0.convs.0.weight" in w else "1"
    assert resblock == "2", "ResBlock1 voices (convs1/convs2) are not mapped here"
    n_convs = len({k.split(".")[4] for k in w if k.startswith("dec.resblocks.0.convs.")})
    kernels = [w[f"dec.resblocks.{j}.convs.0.weight"].shape[2] for j in range(per_stage)]
    dilations = [[onnx_model.attr(f"/dec/resblocks.{j}/convs.{c}/Conv", "dilations")[0]
                  for c in range(n_convs)] for j in range(per_stage)]
    hp = dict(
        n_vocab=int(config["num_symbols"]),
        spec_channels=1024 // 2 + 1,  # enc_q only (training): not in the graph
        segment_size=8192 // HOP,     # training only
        inter_channels=w["enc_p.proj.weight"].shape[0] // 2,
        hidden_channels=hidden,
        filter_channels=w["enc_p.encoder.ffn_layers.0.conv_1.weight"].shape[0],
        n_heads=hidden // rel.shape[2],
        n_layers=n_layers,
        kernel_size=w["enc_p.encoder.ffn_layers.0.conv_1.weight"].shape[2],
        p_dropout=0.1,  # eval(): no dropout
        resblock=resblock,
        resblock_kernel_sizes=tuple(kernels),
        resblock_dilation_sizes=tuple(tuple(d) for d in dilations),
        upsample_rates=tuple(rates),
        upsample_initial_channel=ups[0].shape[0],
        upsample_kernel_sizes=tuple(u.shape[2] for u in ups),
        n_speakers=int(config.get("num_speakers", 1)),
        gin_channels=0,
        use_sdp="dp.flows.0.m" in w,
    )
    assert emb.shape[0] == hp["n_vocab"], (emb.shape, hp["n_vocab"])
    assert hp["n_speakers"] == 1, "multi-speaker voices (emb_g, cond layers) are not mapped here"
    assert math.prod(rates) == HOP
    return hp


def onnx_to_state(onnx_model):
    """{state_dict key: array} from the initialisers (the mapping in the module docstring)."""
    out, used = {}, set()
    for name, arr in onnx_model.inits.items():
        if name == "sid":
            assert [n.name for n in onnx_model.consumers[name]] == ["/enc_p/emb/Gather"]
            out["enc_p.emb.weight"] = arr
        elif name.startswith("onnx::Conv_"):
            (node,) = onnx_model.consumers[name]
            assert node.op_type == "Conv" and list(node.input).index(name) == 1, node.name
            m = re.fullmatch(r"/(.+)/Conv", node.name)
            out[m.group(1).replace("/", ".") + ".weight"] = arr
        elif name == "/dp/flows.0/Exp_output_0":
            (node,) = onnx_model.consumers[name]
            assert node.op_type == "Mul" and node.name == "/dp/flows.0/Mul", node.name
            out["dp.flows.0.logs"] = -np.log(arr)
        elif re.fullmatch(r"(enc_p|dec|flow|dp)\.[\w.]+", name):
            out[name] = arr
        else:
            continue  # graph constants (/…/Constant_*, shapes, split sizes)
        used.add(name)
    return out, used


def load_model(model_path, wheel, device):
    import torch
    models = import_vits(wheel)
    om = Onnx(model_path)
    config_path = model_path + ".json"
    if os.path.exists(config_path):
        with open(config_path) as f:
            config = json.load(f)
    else:  # the graph alone: one speaker (no emb_g in it), the embedding's rows
        log(f"{config_path} absent: num_symbols from the embedding, one speaker")
        config_path, config = None, {"num_symbols": om.inits["sid"].shape[0], "num_speakers": 1}
    hp = hyperparameters(om, config)
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.nn.utils.weight_norm is deprecated
        model = models.SynthesizerTrn(**hp)
        # What the export did (dec) and what its constant folding did (the flow's WN layers).
        model.dec.remove_weight_norm()
        for f in model.flow.flows:
            if hasattr(f, "enc"):
                f.enc.remove_weight_norm()
    state, _ = onnx_to_state(om)
    own = model.state_dict()
    unused = sorted(set(state) - set(own))
    if unused:
        sys.exit(f"initialisers with no parameter: {unused[:10]}")
    for k, v in state.items():
        if tuple(own[k].shape) != v.shape:
            sys.exit(f"{k}: ONNX {v.shape}, module {tuple(own[k].shape)}")
    missing = sorted(set(own) - set(state))
    not_in_graph = re.compile(r"enc_q\..*|dp\.post_.*|dp\.flows\.1\..*")
    bad = [k for k in missing if not not_in_graph.fullmatch(k)]
    if bad:
        sys.exit(f"parameters infer() needs but the ONNX file lacks: {bad[:10]}")
    model.load_state_dict({k: torch.from_numpy(np.array(v, dtype=np.float32)) for k, v in state.items()},
                          strict=False)
    model.eval().to(device)
    info = {"config": config_path, "hyperparameters": hp, "loaded_tensors": len(state),
            "left_at_init_not_in_graph": sorted({".".join(k.split(".")[:3]) for k in missing})}
    return model, info


# ----------------------------------------------------------------------------- running it

MODES = ("fp32", "fp16", "fp16-flowdec", "tf32")


def set_mode(torch, model, device, mode):
    torch.backends.cudnn.allow_tf32 = mode != "fp32" and mode != "fp16-flowdec"  # default: True
    torch.backends.cuda.matmul.allow_tf32 = False                                # default: False
    for name in ("flow", "dec"):
        mod = getattr(model, name)
        mod.__dict__.pop("forward", None)  # back to the class's forward
        if mode == "fp16-flowdec":
            # Piper's own forward, called under autocast (torch.autocast works as a decorator).
            mod.forward = torch.autocast(device.type, dtype=torch.float16)(mod.forward)


def synthesize(torch, model, batch, device, mode):
    """One model call: [(pcm float32, duration frames per id uint32)] per item, on the host."""
    ids, lengths, _ = REF.feed(batch)
    x = torch.from_numpy(ids).to(device, non_blocking=True)
    xl = torch.from_numpy(lengths).to(device, non_blocking=True)
    autocast = torch.autocast(device_type=device.type, dtype=torch.float16,
                              enabled=mode == "fp16")
    with torch.inference_mode(), autocast:
        o, attn, y_mask, _ = model.infer(x, xl, noise_scale=0.0, length_scale=1.0,
                                         noise_scale_w=0.0)
        frames = y_mask.sum((1, 2)).long()
        durs = attn.float().sum(2).squeeze(1).round().to(torch.int64)  # = ceil(w) per id
    o, frames, durs = o.float().cpu().numpy(), frames.cpu().numpy(), durs.cpu().numpy()
    out = []
    for r, b in enumerate(batch):
        n = int(frames[r]) * HOP
        out.append((o[r].reshape(-1)[:n], durs[r][: len(b)].astype(np.uint32)))
    return out


def modes_for(device, asked):
    return asked or (list(MODES) if device.type == "cuda" else ["fp32"])


def setup(a):
    import torch
    if a.threads:
        torch.set_num_threads(a.threads)
    torch.backends.cudnn.benchmark = a.cudnn_benchmark
    dev = a.device if a.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(dev)
    model, info = load_model(a.model, find_wheel(a.wheel), device)
    env = {"torch": torch.__version__, "device": dev,
           "gpu": torch.cuda.get_device_name(0) if dev == "cuda" else None,
           "cudnn": torch.backends.cudnn.version() if dev == "cuda" else None,
           "cudnn_benchmark": torch.backends.cudnn.benchmark,
           "torch_threads": torch.get_num_threads(), "wheel": os.path.basename(find_wheel(a.wheel))}
    return torch, device, model, info, env


def cmd_check(a):
    torch, device, model, info, env = setup(a)
    sents = REF.held_out(a.ids)[: a.limit or None]
    if a.ref:
        ref = REF.read_items(a.ref)[: len(sents)]
        ref_secs = None
    else:
        import onnxruntime as ort
        env["onnxruntime"] = ort.__version__
        sess = REF.ort_session(REF.with_durations(a.model), a.ort_threads)
        t = time.perf_counter()
        ref = [REF.run_ort(sess, [s])[0] for s in sents]
        ref_secs = time.perf_counter() - t
        log(f"onnxruntime reference: {len(ref)} sentences in {ref_secs:.1f} s")
    audio = sum(len(p) for p, _ in ref) / 22050
    rows, ok = [], True
    for mode in modes_for(device, a.modes):
        set_mode(torch, model, device, mode)
        for n in a.batches:
            items = [None] * len(sents)
            t = time.perf_counter()
            for g in REF.batches([len(s) for s in sents], n):
                for i, item in zip(g, synthesize(torch, model, [sents[i] for i in g], device, mode)):
                    items[i] = item
            secs = time.perf_counter() - t
            snrs, dur_mismatch, len_mismatch, non_finite = [], [], 0, 0
            for i, ((rp, rf), (tp, tf)) in enumerate(zip(ref, items)):
                non_finite += int(np.sum(~np.isfinite(tp)))
                if not np.array_equal(rf, tf):
                    dur_mismatch.append(i)
                if len(rp) != len(tp):
                    len_mismatch += 1
                    continue
                snrs.append(REF.snr_db(rp, tp))
            s = np.array(snrs) if snrs else np.array([float("nan")])
            row = {"mode": mode, "batch": n, "sentences": len(sents),
                   "durations_identical": len(sents) - len(dur_mismatch),
                   "duration_mismatches": dur_mismatch[:20], "length_mismatches": len_mismatch,
                   "non_finite_samples": non_finite, "snr_db_min": float(s.min()),
                   "snr_db_p05": float(np.percentile(s, 5)), "snr_db_median": float(np.median(s)),
                   "seconds": secs, "audio_seconds_per_second": audio / secs}
            if mode == "fp32" and n == 1:
                row["gate"] = {"min_snr_db": a.min_snr, "durations": "identical"}
                row["pass"] = (not dur_mismatch and len_mismatch == 0 and non_finite == 0
                               and len(snrs) == len(sents) and float(s.min()) >= a.min_snr)
                ok = ok and row["pass"]
            log(json.dumps(row))
            rows.append(row)
    return {"baseline": "pytorch-eager (piper-tts 1.8.0 SynthesizerTrn.infer)", **env, **info,
            "reference": "onnxruntime-cpu batch 1" if not a.ref else a.ref,
            "reference_seconds": ref_secs, "audio_seconds": audio, "rows": rows, "pass": ok}, ok


def profile_pass(torch, one_pass, sync):
    """One more pass under torch.profiler: the ops with the most device (CPU: CPU) time, untimed."""
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=acts) as prof:
        one_pass()
        sync()
    # Kernels and copies only: an aten:: op's device time is its kernels' again.
    ev = [e for e in prof.key_averages() if not e.key.startswith("aten::")]
    if torch.cuda.is_available():
        dev = lambda e: getattr(e, "self_device_time_total", None) or getattr(e, "self_cuda_time_total", 0)  # noqa: E731
    else:
        dev = lambda e: e.self_cpu_time_total  # noqa: E731
    total = sum(dev(e) for e in ev) or 1
    return [{"op": e.key, "self_device_ms": dev(e) / 1e3, "share": dev(e) / total, "calls": e.count}
            for e in sorted(ev, key=dev, reverse=True)[:15]]


def cmd_bench(a):
    torch, device, model, info, env = setup(a)
    sents = REF.held_out(a.ids)[: a.limit or None]
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)

    def run(batch, mode):
        return sum(len(p) for p, _ in synthesize(torch, model, batch, device, mode))

    rows, start = [], time.perf_counter()
    for mode in modes_for(device, a.modes):
        set_mode(torch, model, device, mode)
        for n in a.batches:
            if a.budget and time.perf_counter() - start > a.budget:
                rows.append({"mode": mode, "batch": n, "skipped": f"past --budget {a.budget} s"})
                log(json.dumps(rows[-1]))
                continue
            groups = REF.batches([len(s) for s in sents], n)
            sync()
            t = time.perf_counter()
            for g in groups:  # warm-up: one whole untimed pass (allocator, cuDNN heuristics)
                run([sents[i] for i in g], mode)
            sync()
            warm = time.perf_counter() - t
            if device.type == "cuda":
                torch.cuda.reset_peak_memory_stats()
            times, samples = [], 0
            for _ in range(a.passes):
                sync()
                t = time.perf_counter()
                samples = sum(run([sents[i] for i in g], mode) for g in groups)
                sync()
                times.append(time.perf_counter() - t)
            med = statistics.median(times)
            row = {"mode": mode, "batch": n, "calls": len(groups),
                   "mean_items": len(sents) / len(groups), "audio_seconds": samples / 22050,
                   "median_seconds": med, "audio_seconds_per_second": samples / 22050 / med,
                   "times": times, "warmup_seconds": warm}
            if device.type == "cuda":
                row["peak_gpu_mib"] = torch.cuda.max_memory_allocated() / 2**20
            if a.profile:
                row["profile_top"] = profile_pass(torch, lambda: [run([sents[i] for i in g], mode)
                                                                  for g in groups], sync)
            log(json.dumps(row))
            rows.append(row)
    return {"baseline": "pytorch-eager (piper-tts 1.8.0 SynthesizerTrn.infer)", **env,
            "hyperparameters": info["hyperparameters"], "sentences": len(sents),
            "passes": a.passes, "rows": rows}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    csv_ints = lambda v: [int(x) for x in v.split(",")]  # noqa: E731

    def csv_modes(v):
        ms = v.split(",")
        if any(m not in MODES for m in ms):
            raise argparse.ArgumentTypeError(f"modes are {','.join(MODES)}")
        return ms

    for name in ("check", "bench"):
        s = sub.add_parser(name)
        s.add_argument("--model", required=True, help="the voice .onnx (its .onnx.json beside it)")
        s.add_argument("--ids", default=os.path.join(ROOT, "tests", "data", "gpu", "ids.json"))
        s.add_argument("--wheel", help="piper_tts-1.8.0-*.whl (default: .whl/ in the repository)")
        s.add_argument("--device", default="auto", help="auto (cuda when available), cuda, cpu")
        s.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
        s.add_argument("--limit", type=int, default=0, help="only the first N held-out sentences")
        s.add_argument("--modes", type=csv_modes,
                       help=",".join(MODES) + " (default: all on a GPU, fp32 on the CPU)")
        s.add_argument("--cudnn-benchmark", action="store_true",
                       help="torch.backends.cudnn.benchmark = True (autotune per shape)")
    c = sub.choices["check"]
    c.add_argument("--batches", type=csv_ints, default=[1], help="batch sizes to compare (gate: 1)")
    c.add_argument("--ref", help="reference.bin from `gpu-reference.py reference` instead of running ONNX Runtime")
    c.add_argument("--ort-threads", type=int, default=os.cpu_count())
    c.add_argument("--min-snr", type=float, default=40.0)
    b = sub.choices["bench"]
    b.add_argument("--batches", type=csv_ints, default=[1, 8, 64])
    b.add_argument("--passes", type=int, default=2)
    b.add_argument("--profile", action="store_true",
                   help="after each row, one pass under torch.profiler: its top ops by device time")
    b.add_argument("--budget", type=float, default=0,
                   help="seconds: rows that would start later are skipped (0: no limit)")
    a = p.parse_args()
    if a.cmd == "check":
        out, ok = cmd_check(a)
    else:
        out, ok = cmd_bench(a), True
    print(json.dumps(out))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
