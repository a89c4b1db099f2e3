"""The crosstune journey from Python, on this machine's default device.

Starts a crosstune-server here (as `crosstune tune` does without --server), then: describe the
device, build a kernel for it, load it, call it on numpy arrays and time it; tune a matmul,
export the best config as a package, run that and plot the best-so-far curve. With --model, an
ONNX network too: import it, tune its layers, compile it with the records, run it on the device,
time and profile it (and compare with onnxruntime where it is installed). With
CROSSTUNE_SERVER=HOST:PORT set, the device is that server instead.

    python examples/python/journey.py [--trials N] [--model FILE.onnx]

A model to try: `scripts/make-model.py small -o small.onnx` (or `resnet50`), run with the model
venv that scripts/install-deps.sh makes.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

import crosstune as ct

VADD = r"""
#include "crosstune/kernel_abi.h"

static int32_t vadd(const ct_arg* args, int32_t num_args) {
  if (num_args != 3) return 1;
  const DLTensor* a = args[0].value.v_tensor;
  int64_t n = 1;
  for (int32_t d = 0; d < a->ndim; ++d) n *= a->shape[d];
  const float* x = (const float*)a->data;
  const float* y = (const float*)args[1].value.v_tensor->data;
  float* z = (float*)args[2].value.v_tensor->data;
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] + y[i];
  return 0;
}

static const ct_function kFunctions[] = {{"vadd", vadd, "ttt"}};
CT_DEFINE_MODULE("llvm", kFunctions, 0)
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=16, help="matmul configs to measure")
    parser.add_argument("--work", help="folder for the log, package and plot (kept; default: a new "
                        "temporary folder, printed at the end)")
    parser.add_argument("--model", help="an ONNX model to tune, compile and run (optional)")
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="crosstune-journey-")
    os.makedirs(work, exist_ok=True)

    # 1. A device: a local server (or $CROSSTUNE_SERVER), closed at the end of the block.
    with ct.connect() as dev:
        info = dev.info()
        print(f"device: {info['arch']} ({info['triple']}), {info['cores']} cores, {info['cpu_model']}")
        print(f"target: {dev.target()}")

        # 2. Build for it, load, call on numpy arrays (written in place), time.
        mod = dev.load(ct.build(VADD, device=dev, name="vadd"))
        a = np.random.rand(1 << 20).astype("f4")
        b = np.random.rand(1 << 20).astype("f4")
        c = np.zeros(1 << 20, "f4")
        mod["vadd"](a, b, c)
        assert np.array_equal(c, a + b)
        t = mod.time("vadd", a, b, c, number=20, repeat=5)
        print(f"vadd of 1M floats: median {t.median * 1e6:.1f} us over {len(t.seconds_per_call)} rounds")

        # 3. Tune a matmul on the same kind of device; every measurement goes to the log.
        log = os.path.join(work, "mm.jsonl")
        run = ct.tune("matmul", shape=(128, 128, 128), trials=args.trials, log=log,
                      server=os.environ.get("CROSSTUNE_SERVER") or None, progress=True)
        default = run.default
        print(f"untuned: {default['gflops'] if default else 0:.2f} GFLOP/s, "
              f"tuned: {run.best_gflops():.2f} GFLOP/s after {len(run.records)} trials")
        errors = sum(1 for r in run.records if r["error"] != "ok")
        print(f"records: {len(ct.read_log(log))} in {log}, {errors} failed")

        # 4. The log's best record, and that config exported as a package, deployed and checked
        #    against numpy.
        best = ct.best_records(log)[0]
        print(f"best config {best['config']}: {best['gflops']:.2f} GFLOP/s on {best['device']['name']}")
        package = ct.export(log, os.path.join(work, "matmul.ctpkg"))
        matmul = dev.load(package)
        x = np.random.rand(128, 128).astype("f4")
        y = np.random.rand(128, 128).astype("f4")
        z = np.zeros((128, 128), "f4")
        matmul[next(iter(package.functions))](x, y, z)
        error = float(np.max(np.abs(z - x @ y)))
        print(f"exported {package.path}: max abs error against numpy {error:.2e}")
        assert error < 1e-3
        run.svg().save(os.path.join(work, "mm.svg"))
        print(f"best-so-far plot: {os.path.join(work, 'mm.svg')}")

        if args.model:
            run_model(dev, args.model, args.trials, work)


def run_model(dev: ct.Device, path: str, trials: int, work: str) -> None:
    """5. A network: import, tune its layers, compile with the records, run, time, profile."""
    model = ct.import_onnx(path)
    print(f"model {model.name}: {len(model.tasks)} tunable layers, {model.flops / 1e9:.3f} GFLOP "
          f"per run, inputs {[(i['name'], i['shape']) for i in model.inputs]}")
    log = os.path.join(work, model.name + ".jsonl")
    ct.tune(model, trials=trials, round=max(1, trials // 2), log=log,
            server=os.environ.get("CROSSTUNE_SERVER") or None, progress=True)
    package = ct.compile(model, log=log, device=dev).save(os.path.join(work, model.name + ".ctpkg"))
    print(f"compiled {package.path}: {package.tuned} of {package.report['tasks']} tasks tuned, "
          f"{package.report['nodes']} nodes")
    rng = np.random.default_rng(1)
    inputs = {i["name"]: rng.uniform(-1, 1, i["shape"]).astype(i["dtype"]) for i in model.inputs}
    with dev.load_model(package) as net:
        for name, array in inputs.items():
            net.set_input(name, array)
        net.run()
        outputs = [net.get_output(i) for i in range(len(net.outputs))]
        t = net.time(number=5, repeat=3)
        print(f"{model.name} on the device: median {t.median * 1e3:.3f} ms per run")
        print(net.profile(number=2, repeat=2))
    try:
        import onnxruntime  # type: ignore[import-not-found, unused-ignore]
    except ImportError:
        print("onnxruntime is not installed here: no reference check")
        return
    session = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    reference = session.run(None, inputs)
    error = max(float(np.max(np.abs(o - r))) for o, r in zip(outputs, reference))
    print(f"max abs error against onnxruntime: {error:.2e}")
    assert error < 1e-3


if __name__ == "__main__":
    main()
