#!/usr/bin/python3
"""Oracle vectors for metrics_media_tests (issue 6), from independent implementations.

Run with Debian's python3 (python3-skimage, python3-numpy, python3-scipy, ffmpeg):
    /usr/bin/python3 metrics/tests/data/make_media_vectors.py metrics/tests/data
Writes camera.png, camera_noisy.png (the scikit-image test recipe), astronaut_small.png and
astronaut_small_noisy.png (a colour pair), and media_vectors.json with the values scikit-image,
numpy and the ffmpeg CLI give for them, plus provenance (versions, date).
"""
import datetime
import json
import os
import re
import subprocess
import sys

import numpy as np
import scipy
import skimage
from skimage import data, io
from skimage.metrics import peak_signal_noise_ratio, structural_similarity

out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))

# scikit-image's own test recipe (skimage/metrics/tests/test_structural_similarity.py).
cam = data.camera()
rstate = np.random.RandomState(5)
cam_noisy = np.clip(cam + 20.0 * rstate.randn(*cam.shape), 0, 255).astype(cam.dtype)
io.imsave(os.path.join(out, "camera.png"), cam, check_contrast=False)
io.imsave(os.path.join(out, "camera_noisy.png"), cam_noisy, check_contrast=False)

# A colour pair (RGB in skimage, BGR in OpenCV): astronaut, 128x96 crop, noise sigma 12, seed 7.
ast = data.astronaut()[100:196, 180:308]
rs = np.random.RandomState(7)
ast_noisy = np.clip(ast + 12.0 * rs.randn(*ast.shape), 0, 255).astype(np.uint8)
io.imsave(os.path.join(out, "astronaut_small.png"), ast, check_contrast=False)
io.imsave(os.path.join(out, "astronaut_small_noisy.png"), ast_noisy, check_contrast=False)


def lap_var(img):
    # OpenCV Laplacian ksize 1 = kernel [[0,1,0],[1,-4,1],[0,1,0]], BORDER_REFLECT_101 (numpy 'reflect').
    p = np.pad(img.astype(np.float64), 1, mode="reflect")
    lap = p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * p[1:-1, 1:-1]
    return float(lap.var())


def ffmpeg_ssim_psnr(a, b):
    # The ffmpeg CLI on two grey PNGs: SSIM of the Y plane (its 8x8/4px integer windows).
    r = subprocess.run(["ffmpeg", "-hide_banner", "-nostats", "-i", a, "-i", b, "-lavfi", "ssim;[0:v][1:v]psnr",
                        "-f", "null", "-"], capture_output=True, text=True, check=True)
    ssim = float(re.search(r"SSIM Y:([0-9.]+)", r.stderr).group(1))
    psnr = float(re.search(r"PSNR y:([0-9.]+)", r.stderr).group(1))
    return ssim, psnr


ff_ssim, ff_psnr = ffmpeg_ssim_psnr(os.path.join(out, "camera_noisy.png"), os.path.join(out, "camera.png"))
ffver = subprocess.run(["ffmpeg", "-version"], capture_output=True, text=True).stdout.splitlines()[0]

# Per-channel values on the colour pair, channel order B, G, R (OpenCV's).
ast_ch = {}
for name, c in (("B", 2), ("G", 1), ("R", 0)):
    a, b = ast[..., c], ast_noisy[..., c]
    ast_ch[name] = {
        "mse": float(np.mean((a.astype(np.float64) - b) ** 2)),
        "ssim_skimage": float(structural_similarity(a, b, data_range=255)),
        "ssim_wang": float(structural_similarity(a, b, data_range=255, gaussian_weights=True, sigma=1.5,
                                                 use_sample_covariance=False)),
    }

vectors = {
    "provenance": {
        "generator": "metrics/tests/data/make_media_vectors.py",
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
        "scikit-image": skimage.__version__, "numpy": np.__version__, "scipy": scipy.__version__,
        "ffmpeg": ffver,
    },
    "camera": {
        "psnr": float(peak_signal_noise_ratio(cam, cam_noisy)),
        "ssim_skimage": float(structural_similarity(cam, cam_noisy, data_range=255)),
        "ssim_wang": float(structural_similarity(cam, cam_noisy, data_range=255, gaussian_weights=True, sigma=1.5,
                                                 use_sample_covariance=False)),
        "ssim_ffmpeg_cli": ff_ssim,
        "psnr_ffmpeg_cli": ff_psnr,
        "luma_mean": float(cam.mean()), "luma_std": float(cam.std()), "laplacian_var": lap_var(cam),
        "noisy_luma_mean": float(cam_noisy.mean()), "noisy_luma_std": float(cam_noisy.std()),
        "noisy_laplacian_var": lap_var(cam_noisy),
        "mean_abs_diff": float(np.mean(np.abs(cam.astype(np.int64) - cam_noisy))),
    },
    "astronaut_small": {
        "channels": ast_ch,
        "psnr_pooled": float(peak_signal_noise_ratio(ast, ast_noisy)),
        "ssim_skimage_mean": float(structural_similarity(ast, ast_noisy, data_range=255, channel_axis=-1)),
    },
}
with open(os.path.join(out, "media_vectors.json"), "w") as f:
    json.dump(vectors, f, indent=2)
    f.write("\n")
print(json.dumps(vectors, indent=2))
