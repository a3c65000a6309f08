"""Reference for the MetaVoice speaker encoder (the original's
fam/quantiser/audio/speaker_encoder/{model,audio}.py), with the librosa pieces it calls written
out from librosa 0.10's formulas (librosa itself is not a dependency):

- effects.trim(top_db=20): frame 2048, hop 512, centred RMS with zero padding, ref = max;
- feature.melspectrogram(sr=16000, n_fft=400, hop_length=160, n_mels=40): periodic Hann,
  center=True with zero padding, power spectrum, Slaney mel filterbank with Slaney norm;
- compute_partial_slices(rate=1.3, min_coverage=0.75), padding, LSTM(40, 256, 3) -> hidden[-1]
  -> Linear -> ReLU -> L2 norm, mean over partials, L2 norm.

random_state_dict(seed) gives weights with the real shapes; write_pt() saves them as the original
speaker_encoder.pt layout ({"model_state": ..., other keys}).
"""

import math

import numpy as np
import torch

SR = 16000
N_FFT = 400
HOP = 160
N_MELS = 40
PARTIAL = 160


def hz_to_mel(f):
    f_sp = 200.0 / 3
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = math.log(6.4) / 27.0
    f = np.asarray(f, dtype=np.float64)
    return np.where(f >= min_log_hz,
                    min_log_mel + np.log(np.maximum(f, 1e-30) / min_log_hz) / logstep, f / f_sp)


def mel_to_hz(m):
    f_sp = 200.0 / 3
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = math.log(6.4) / 27.0
    m = np.asarray(m, dtype=np.float64)
    return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), f_sp * m)


def mel_filterbank():
    fftfreqs = np.arange(N_FFT // 2 + 1, dtype=np.float64) * SR / N_FFT
    mel_f = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(SR / 2.0), N_MELS + 2))
    fdiff = np.diff(mel_f)
    ramps = np.subtract.outer(mel_f, fftfreqs)
    weights = np.zeros((N_MELS, N_FFT // 2 + 1), dtype=np.float32)
    for i in range(N_MELS):
        lower = -ramps[i] / fdiff[i]
        upper = ramps[i + 2] / fdiff[i + 1]
        weights[i] = np.maximum(0, np.minimum(lower, upper))
    enorm = 2.0 / (mel_f[2:N_MELS + 2] - mel_f[:N_MELS])
    weights *= enorm[:, np.newaxis]
    return weights


def melspectrogram(y):
    """[frames, 40] float32, frames = 1 + len // 160."""
    y = np.asarray(y, dtype=np.float64)
    pad = np.pad(y, (N_FFT // 2, N_FFT // 2), mode="constant")
    n_frames = 1 + len(y) // HOP
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)
    idx = np.arange(N_FFT)[None, :] + HOP * np.arange(n_frames)[:, None]
    frames = pad[idx] * window[None, :]
    spec = np.abs(np.fft.rfft(frames, axis=1)) ** 2
    mel = spec @ mel_filterbank().astype(np.float64).T
    return mel.astype(np.float32)


def trim(y, top_db=20.0):
    y = np.asarray(y, dtype=np.float32)
    n = len(y)
    if n == 0:
        return y
    frame, hop = 2048, 512
    pad = np.pad(y.astype(np.float64), (frame // 2, frame // 2), mode="constant")
    n_frames = 1 + n // hop
    mse = np.array([np.mean(pad[t * hop:t * hop + frame] ** 2) for t in range(n_frames)])
    ref = max(1e-10, mse.max())
    db = 10 * np.log10(np.maximum(1e-10, mse)) - 10 * np.log10(ref)
    nz = np.flatnonzero(db > -top_db)
    if nz.size == 0:
        return y[0:0]
    start = nz[0] * hop
    end = min(n, (nz[-1] + 1) * hop)
    return y[start:end]


def partial_slices(n_samples, rate=1.3, min_coverage=0.75):
    samples_per_frame = HOP
    n_frames = int(np.ceil((n_samples + 1) / samples_per_frame))
    frame_step = int(np.round((SR / rate) / samples_per_frame))
    steps = max(1, n_frames - PARTIAL + frame_step + 1)
    wav_slices, mel_slices = [], []
    for i in range(0, steps, frame_step):
        mel_slices.append(slice(i, i + PARTIAL))
        wav_slices.append(slice(i * samples_per_frame, (i + PARTIAL) * samples_per_frame))
    last = wav_slices[-1]
    coverage = (n_samples - last.start) / (last.stop - last.start)
    if coverage < min_coverage and len(mel_slices) > 1:
        mel_slices = mel_slices[:-1]
        wav_slices = wav_slices[:-1]
    return wav_slices, mel_slices


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(N_MELS, 256, 3, batch_first=True)
        self.linear = torch.nn.Linear(256, 256)
        self.relu = torch.nn.ReLU()

    def forward(self, mels):
        _, (hidden, _) = self.lstm(mels)
        e = self.relu(self.linear(hidden[-1]))
        return e / torch.norm(e, dim=1, keepdim=True)


def random_state_dict(seed=0):
    torch.manual_seed(seed)
    net = Net()
    with torch.no_grad():
        # Scaled up from PyTorch's default init so that the embedding depends strongly on the
        # input (the default gives nearly input-independent outputs); a positive linear bias
        # keeps ReLU rows away from zero.
        for name, p in net.lstm.named_parameters():
            if name.startswith("weight"):
                p.mul_(12.0 if name == "weight_ih_l0" else 3.0)
        net.linear.weight.mul_(4.0)
        net.linear.bias.add_(0.05)
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def embed_utterance(state, wav):
    net = Net()
    net.load_state_dict(state, strict=False)
    net.eval()
    wav = np.asarray(wav, dtype=np.float32)
    wav_slices, mel_slices = partial_slices(len(wav))
    max_len = wav_slices[-1].stop
    if max_len >= len(wav):
        wav = np.pad(wav, (0, max_len - len(wav)), "constant")
    mel = melspectrogram(wav)
    mels = torch.from_numpy(np.array([mel[s] for s in mel_slices]))
    with torch.no_grad():
        partial = net(mels)
    raw = np.mean(partial.numpy(), axis=0)
    return raw / np.linalg.norm(raw, 2)


def embed(state, wav16k, do_trim=True):
    y = trim(wav16k) if do_trim else np.asarray(wav16k, dtype=np.float32)
    return embed_utterance(state, y)


def write_pt(path, state, dtype=None):
    """The original's checkpoint layout."""
    ms = {k: (v.to(dtype) if dtype is not None else v) for k, v in state.items()}
    torch.save({"step": 1000, "model_state": ms, "optimizer_state": {"lr": 1e-4}}, path)


def write_tiny_speaker_encoder(path, seed=0):
    """Writes random speaker-encoder weights (real shapes, f32) as safetensors at path and
    returns the state dict. A path ending in .pt gets the original's torch.save layout."""
    state = random_state_dict(seed)
    if path.endswith(".pt"):
        write_pt(path, state)
    else:
        import os
        import sys
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import safetensors_io
        safetensors_io.save_file(state, path)
    return state
