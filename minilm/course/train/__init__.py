"""Train a small Transformer language model on Tiny Shakespeare (or any UTF-8 text file).

    minilm train                                  # --budget 3m: measures this machine, sizes the model, ends on time
    minilm train --budget 10m                     # any wall-clock budget (90s, 1h, 1m30s; at least 30s)
    minilm train --steps 2000 --d-model 256       # a fixed number of steps instead; --help for every option
    minilm train --steps 2000 --resume            # continue the run in --out-dir after an interruption
    torchrun --nproc_per_node 2 -m minilm.course.train             # data-parallel (DDP) on 2 processes

It trains with YOUR exercise code: your training loop (minilm.train), minilm.TransformerLM,
get_batch, cross_entropy, clip_grad_norm, lr_cosine_schedule, AdamW, save/load_checkpoint and
generate, and notebook 14's
lr_wsd_schedule for its default schedule (the cosine until you have written it; --help lists the
recipe's flags) (with MINILM_IMPL=solutions it uses the reference instead). It
prints the unigram baseline (the loss of a model that ignores context), the validation loss
every --eval-interval steps, the final one in nats per token and in bits per byte (comparable across tokenizers), and a
sample of generated text at the end. The latest checkpoint is out_dir/checkpoint.pt, the losses
step by step out_dir/metrics.jsonl and their curves out_dir/loss.png; unless --full-vocab,
out_dir/vocab.npy maps the model's token ids to GPT-2's.

Its modules, in the order a run uses them: options.py (the flags and their checks), plan.py (the
durations, measuring this machine, the budget planner, the hardware note), dist.py (the process
group under torchrun), metrics.py (evaluation, bits per byte, the unigram baseline: what the
plots share with the command), loop.py (the small models' config and run lengths), record.py (out_dir/metrics.jsonl,
a JSON line per logged step, and out_dir/loss.png, its curves), and run.py (main: set up, plan,
train, report). The vocabulary is minilm/course/vocab.py, beside the corpus code.
"""
