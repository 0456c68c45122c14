"""generate, logits, tokenizers and chat templates against the golden data."""
import json

import numpy as np
import pytest
from conftest import shared

from openautoglm import AutoModelForCausalLM, AutoTokenizer


def golden(rel):
    with open(shared(rel), encoding="utf-8") as f:
        return json.load(f)


def test_greedy_text_is_the_golden_text(stories):
    case = golden("golden/stories260k-once/case.json")
    tok = stories.tokenizer
    ids = tok("Once upon a time")["input_ids"]
    assert ids == case["greedy"]["input_tokens"]
    out = stories.generate(ids, max_new_tokens=64)
    assert out[: len(ids)] == ids
    assert out[len(ids):] == case["greedy"]["output_tokens"]
    assert tok.decode(out[len(ids):], skip_special_tokens=True) == case["greedy"]["output_text"]
    # numpy in, numpy out ([batch, n]), and a text prompt gives the same ids
    arr = stories.generate(np.array([ids]), max_new_tokens=64)
    assert arr.shape == (1, len(out)) and arr[0].tolist() == out
    assert stories.generate(np.array(ids), max_new_tokens=64) == out  # a 1-D array is one prompt
    assert stories.generate("Once upon a time", max_new_tokens=64) == out


@pytest.mark.parametrize("case_dir", ["stories260k-once", "hf-llama3-tiny"])
def test_logits_match_the_golden_case(case_dir):
    case = golden(f"golden/{case_dir}/case.json")
    m = AutoModelForCausalLM.from_pretrained(shared(case["model"]), threads=2, kv_memory_mib=16, kv_cache_dtype="f32")
    ids = case["input_tokens"]
    logits = m(np.array([ids])).logits
    assert logits.shape == (1, len(ids), m.tokenizer.vocab_size) and logits.dtype == np.float32
    ref = np.fromfile(shared(f"golden/{case_dir}/{case['logits_file']}"), dtype=np.float32).reshape(case["logits_shape"])
    got = logits[0][case["logit_positions"]]
    tol = case["tolerance"]
    assert np.max(np.abs(got - ref)) <= tol["max_abs"]
    assert np.sqrt(np.mean((got - ref) ** 2)) <= tol["rms"]
    assert (got.argmax(1) == ref.argmax(1)).all()


@pytest.mark.parametrize("case_dir", ["rand-qwen3moe", "rand-glm4moe", "rand-gpt-oss", "rand-deepseek2-mla"])
def test_mixture_of_experts_logits_and_greedy_match_the_golden_case(case_dir):
    """The MoE and latent-attention architectures through the Python package (cases_next of the index)."""
    case = golden(f"golden/{case_dir}/case.json")
    m = AutoModelForCausalLM.from_pretrained(shared(case["model"]), threads=2, kv_memory_mib=16)
    ids = case["input_tokens"]
    got = m(np.array([ids])).logits[0].astype(np.float64)
    ref = np.fromfile(shared(f"golden/{case_dir}/{case['logits_file']}"), dtype=np.float32).reshape(case["logits_shape"])
    tol = case["tolerance"]
    assert np.max(np.abs(got - ref)) <= tol["max_abs"]
    assert np.sqrt(np.mean((got - ref) ** 2)) <= tol["rms"]
    assert (got.argmax(1) == ref.argmax(1)).mean() >= tol["top1_agreement"] - 1e-6
    g = case["greedy"]
    out = m.generate(g["input_tokens"], max_new_tokens=g["n_predict"])
    k = g["match_required_prefix"]
    assert out[len(g["input_tokens"]):][:k] == g["output_tokens"][:k]


def test_perplexity_is_the_exp_of_the_mean_negative_log_likelihood(stories):
    text = "Once upon a time, there was a little girl named Lily."
    ids = stories.tokenizer.encode(text)
    logits = stories(ids).logits[0].astype(np.float64)
    logp = logits - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1, keepdims=True)) - logits.max(1, keepdims=True)
    expected = float(np.exp(-np.mean([logp[i, ids[i + 1]] for i in range(len(ids) - 1)])))
    assert stories.perplexity(text) == pytest.approx(expected, rel=1e-6)
    assert stories.perplexity(text) < stories.perplexity("zebra quantum tax ledger fjord")


@pytest.mark.parametrize("name", ["qwen3", "llama3", "llama2"])
def test_tokenizer_ids_and_decode_are_the_golden_ones(name):
    g = golden(f"golden/tokenizers/{name}.json")
    tok = AutoTokenizer.from_pretrained(shared(f"models/hf-tokenizers/{name}"))
    failures = []
    for c in g["cases"]:
        want = c["ids"]
        disagreement = c.get("oracle_disagreement", {})
        if "ids" in disagreement and disagreement.get("explanation", "").startswith("JS regex"):
            want = disagreement["ids"]["llama_cpp"]  # the oracle's JS regex differs from Python's (see README)
        if tok.encode(c["text"], add_special_tokens=False) != want:
            failures.append(("ids", c["text"]))
        if tok.decode(c["ids"]) != c["decoded"]:
            failures.append(("decoded", c["text"]))
    assert not failures, failures[:5]


@pytest.mark.parametrize("name", ["qwen3", "llama3"])
def test_apply_chat_template_renders_the_golden_text(name):
    g = golden(f"golden/chat_templates/{name}.json")
    tok = AutoTokenizer.from_pretrained(shared(f"models/hf-tokenizers/{name}"))
    for c in g["cases"]:
        text = tok.apply_chat_template(c["messages"], tools=c.get("tools"), tokenize=False,
                                       add_generation_prompt=c["add_generation_prompt"], **c.get("extra_context", {}))
        assert text == c["expected"], c["name"]
    ids = tok.apply_chat_template(g["cases"][0]["messages"])
    assert tok.decode(ids) == tok.apply_chat_template(g["cases"][0]["messages"], tokenize=False)


def test_tokenizer_call_batches_and_numpy():
    tok = AutoTokenizer.from_pretrained(shared("models/stories260K.gguf"))
    enc = tok(["Once upon a time", "Lily"], padding=True, return_tensors="np")
    assert enc.input_ids.shape[0] == 2 and enc.attention_mask[1].sum() == len(tok.encode("Lily"))
    with pytest.raises(ValueError, match="padding=True"):
        tok(["Once upon a time", "Lily"], return_tensors="np")
    lily = tok.encode("Lily")
    assert tok.batch_decode(np.array([lily, lily]), skip_special_tokens=True) == [tok.decode(lily[1:])] * 2
    assert tok.bos_token_id == 1 and tok.decode([1]) == tok.bos_token
