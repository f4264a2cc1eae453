#!/usr/bin/env python3
"""Oracle for `attest metrics audio` on an int16 WAV pair (issue 16: a user saw attest's SNR differ
from torchmetrics' by more than 1e-3 dB).

Writes ref16.wav (0.5 s, 16 kHz, int16: two tones) and test16_lsb1.wav / test16_lsb40.wav (the
reference plus uniform integer noise of +-1 / +-40 LSB, numpy default_rng(7)), with scipy's WAV
writer (not libsndfile, which attest reads them with), and audio_snr_vectors.json with:
  exact_snr_db   10 log10(sum r^2 / sum (r - t)^2) from Python integers (exact sums; the int16 scale
                 cancels), the independent computation attest must equal;
  torchmetrics_* torchmetrics' signal_noise_ratio / scale_invariant_signal_distortion_ratio on the
                 samples as float32 in [-1, 1) (k / 32768, the torchaudio.load convention).
torchmetrics adds float32 epsilon (1.19e-7) to both energies: next to a 1-LSB noise energy of
~1.7e-5 that is a bias of ~0.03 dB, which is the reported difference; `--snr-eps 1.1920929e-07`
makes attest reproduce it.

Regenerate: build/py-venv/bin/pip install torchmetrics scipy &&
            build/py-venv/bin/python metrics/tests/data/make_audio_snr_vectors.py metrics/tests/data
"""
import json
import math
import sys
from datetime import date
from pathlib import Path

import numpy as np
import scipy
import scipy.io.wavfile as wavfile
import torch
import torchmetrics
from torchmetrics.functional.audio import scale_invariant_signal_distortion_ratio, signal_noise_ratio

out = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
sr, n = 16000, 8000
t = np.arange(n) / sr
ref = np.round((0.5 * np.sin(2 * np.pi * 440 * t) + 0.2 * np.sin(2 * np.pi * 1320 * t + 0.3)) * 32767).astype(np.int16)
wavfile.write(out / "ref16.wav", sr, ref)
rng = np.random.default_rng(7)
vectors = {
    "generator": "metrics/tests/data/make_audio_snr_vectors.py",
    "date": str(date.today()),
    "versions": {"torchmetrics": torchmetrics.__version__, "torch": torch.__version__, "numpy": np.__version__,
                 "scipy": scipy.__version__},
    "torchmetrics_eps": float(torch.finfo(torch.float32).eps),
    "pairs": [],
}
for lsb in (1, 40):
    test = np.clip(ref.astype(np.int64) + rng.integers(-lsb, lsb + 1, n), -32768, 32767).astype(np.int16)
    name = f"test16_lsb{lsb}.wav"
    wavfile.write(out / name, sr, test)
    r, p = [int(x) for x in ref], [int(x) for x in test]
    num, den = sum(x * x for x in r), sum((x - y) ** 2 for x, y in zip(r, p))
    f32 = lambda a: torch.tensor(a.astype(np.float32) / 32768)
    vectors["pairs"].append({
        "test": name, "reference": "ref16.wav",
        "signal_energy_lsb2": num, "noise_energy_lsb2": den,
        "exact_snr_db": 10 * math.log10(num / den),
        "torchmetrics_snr_db": signal_noise_ratio(f32(test), f32(ref)).item(),
        "torchmetrics_si_sdr_db": scale_invariant_signal_distortion_ratio(f32(test), f32(ref)).item(),
    })
(out / "audio_snr_vectors.json").write_text(json.dumps(vectors, indent=1) + "\n")
print(json.dumps(vectors["pairs"], indent=1))
