"""The nnabla-examples programs the runner knows: where each is, the arguments that make it
short, the datasets it reads, where to stop and what to compare.

``args`` may name ``{cwd}`` (the run's working directory), ``{prog_dir}`` (the program's
folder) and ``{corpus}``. ``stop`` is ``"series name:N"``: the run ends after that
``MonitorSeries`` got its N-th value. ``compare``: the series compared (default: those whose
name has "loss"). ``tol``: the largest relative difference accepted; deterministic programs
are held to float32 round-off accumulated over the iterations run. ``floor``: relative
differences are taken against max(|nnabla's value|, floor). ``links``: files of the program's
folder it opens by a path relative to the working directory (``./learning_rate.yaml``): they
are linked into the run's working directory. ``float64_args``: arguments added to run the
program in float64 on nnabla_jit (``-t double``), a reference both float32 runs are measured
against (``runner.py --float64``).
"""


class Entry:
    def __init__(self, name, path, args=(), data=(), stop="", compare=None, tol=1e-4, floor=1e-3,
                 timing=None, pythonpath=("utils",), setup=(), stdout_series=None, links=(),
                 float64_args=None, note=""):
        self.name, self.path, self.args = name, path, list(args)
        self.data = [(d, {}) if isinstance(d, str) else (d[0], dict(d[1])) for d in data]
        self.stop, self.compare, self.tol, self.floor = stop, compare, tol, floor
        self.timing, self.pythonpath, self.setup = timing, list(pythonpath), list(setup)
        self.stdout_series, self.links, self.note = stdout_series, list(links), note
        self.float64_args = list(float64_args) if float64_args else None

    def key(self):
        return [self.name, self.path, self.args, self.data, self.stop, self.pythonpath,
                self.setup, self.stdout_series, self.links]


PROGRAMS = [
    Entry("pfc-mnist", "parametric_function_classes/mnist-collection/main.py",
          data=[("mnist", {"train": 640, "test": 128})],
          stop="Training loss:8",
          note="nn.Module-style parametric function classes; image_augmentation replayed"),
    Entry("svd-mnist", "compression/mnist/svd/classification.py",
          args=["-c", "cpu", "-i", "8", "-v", "1000", "-b", "32", "-m", "{cwd}/tmp.monitor"],
          data=[("mnist", {"train": 640, "test": 128})],
          stop="Training loss:8"),
    Entry("svd-mnist-slim", "compression/mnist/svd/classification_svd.py",
          setup=[("compression/mnist/svd/classification.py",
                  ["-c", "cpu", "-i", "8", "-v", "1000", "-b", "32", "-m", "{cwd}/ref", "-o", "{cwd}/ref"])],
          args=["-c", "cpu", "-i", "8", "-v", "1000", "-b", "32", "-m", "{cwd}/tmp.monitor",
                "-T", "{cwd}/ref/params_000008.h5"],
          data=[("mnist", {"train": 640, "test": 128})],
          stop="Training loss:8",
          note="the LeNet of svd-mnist (trained first, unchanged) factored by SVD, then trained"),
    Entry("quantization-cifar10", "compression/cifar10/quantization/classification.py",
          args=["-c", "cpu", "-i", "6", "-v", "1000", "-b", "50", "-m", "{cwd}/tmp.monitor"],
          data=["cifar10"], stop="Training loss:6",
          float64_args=["-t", "double"],
          note="binary connect ResNet-23"),
    Entry("wgan-gp", "image-generation/wgan/train.py",
          args=["-c", "cpu", "-b", "16", "-i", "6", "--maps", "16", "--latent", "16",
                "--n-critic", "2", "--up", "nearest", "--monitor-path", "{cwd}/result", "--save-interval", "1000"],
          data=["cifar10"], stop="Generator Loss:6",
          tol=2e-3, note="WGAN-GP: nn.grad gradient penalty; F.rand replayed"),
    Entry("maml", "meta-learning/maml/train_maml.py",
          args=["--datasource", "omniglot", "--dataset_root", "{cwd}", "--metatrain_iterations", "6",
                "--meta_batch_size", "4", "--num_shots", "1", "--update_lr", "0.4", "--num_updates", "1",
                "--num_filters", "32", "--logdir", "{cwd}/logs", "--context", "cpu",
                "--print_interval", "1", "--test_print_interval", "1000", "--save_interval", "1000"],
          data=["omniglot"], stop="Training loss:6",
          note="MAML: second-order nn.grad through the inner update"),
    Entry("pointnet", "3d-object-classification/pointnet/train.py",
          args=["--data_dir", "{cwd}/data/modelnet40_normal_resampled", "--num_points", "256",
                "--batch_size", "8", "--max_epoch", "1", "--context", "cpu",
                "--result_dir", "{cwd}/result", "--eval_interval", "1"],
          data=[("modelnet40", {"points": 256})], stop="training loss:8",
          note="PointNet classification (ModelNet40 layout)"),
    Entry("tracin", "responsible_ai/tracin/train.py",
          args=["--input", "{cwd}/cifar10_npy", "--model", "resnet23", "--train_batch_size", "16",
                "--val_batch_size", "16", "--train_epochs", "6", "--context", "cpu",
                "--monitor-path", "{cwd}/monitor", "--model_save_path", "{cwd}/model"],
          data=[("cifar10_npy", {"train": 16, "test": 16})], links=["learning_rate.yaml"],
          stop="Training loss:6",
          float64_args=["--type_config", "double"],
          note="TracIn's training run (ResNet-23, momentum SGD, warmup schedule); 16 training "
               "images, one batch: an epoch is one step, its loss one forward"),
    Entry("word2vec", "language-modeling/word2vec/word_embedding.py",
          args=["-c", "cpu", "-m", "{cwd}/w2v/", "-b", "50", "-i", "1", "-v", "1000", "-mw", "5"],
          data=["ptb"], stop="Training loss:10",
          note="skip-gram with negative sampling (PF.embed shared by name)"),
    Entry("darts-search", "neural-architecture-search/DARTS/darts_search.py",
          args=["-c", "cpu", "-b", "8", "-e", "1", "--num-cells", "2", "--num-nodes", "5",
                "--output-filter", "8", "-m", "{cwd}/monitor", "-o", "{cwd}/model"],
          data=["cifar10"], stop="Validation loss:6",
          note="DARTS architecture search (first order): mixed ops, two solvers"),
    Entry("distillation-teacher", "compression/cifar10/distillation/classification.py",
          args=["-c", "cpu", "-b", "125", "-i", "6", "-v", "1000", "--maps", "16",
                "-m", "{cwd}/tmp.monitor", "-o", "{cwd}/tmp.monitor"],
          data=["cifar10"], stop="Training loss:6",
          note="ResNet-23 teacher (16 maps); validates on all 10000 test images first"),    Entry("tiny-imagenet-resnet18", "image-classification/imagenet/obsolete/classification.py",
          args=["-c", "cpu", "-M", "True", "-L", "18", "-b", "8", "-a", "2", "-i", "6", "-v", "1000",
                "-s", "1000", "-m", "{cwd}/monitor", "-o", "{cwd}/model"],
          data=["tiny_imagenet"], stop="Training loss:6",
          note="ResNet-18 on Tiny ImageNet JPEGs, gradient accumulation, uint8 input casts; "
               "image_augmentation replayed"),    Entry("prototypical", "meta-learning/prototypical/prototypical.py",
          args=["-c", "cpu", "-dr", "{cwd}", "-nwt", "10", "-mi", "6", "-vi", "1",
                "-ev", "2", "-et", "2", "-w", "{cwd}/result"],
          data=["omniglot"], stop="Training loss:6",
          note="prototypical networks (episodes from np.random), distances between embeddings"),
    Entry("shufflenet-cifar10", "compression/cifar10/shufflenet/classification.py",
          args=["-c", "cpu", "-n", "cifar10_shufflenet_prediction", "--maps", "16", "-g", "2",
                "-b", "100", "-i", "6", "-v", "1000", "-m", "{cwd}/tmp.monitor", "-o", "{cwd}/tmp.monitor"],
          data=["cifar10"], stop="Training loss:6",
          note="ShuffleNet units (grouped 1x1 convolutions, channel shuffle, depthwise); "
               "validates on all 10000 test images first"),
    Entry("shiftnet-cifar10", "compression/cifar10/shiftnet/classification.py",
          args=["-c", "cpu", "-n", "cifar10_shift_csc_prediction", "--maps", "18",
                "-b", "100", "-i", "6", "-v", "1000", "-m", "{cwd}/tmp.monitor", "-o", "{cwd}/tmp.monitor"],
          data=["cifar10"], stop="Training loss:6",
          note="shift operations (slices and concatenations) instead of spatial convolutions; "
               "validates on all 10000 test images first"),
    Entry("mixup-cifar10", "data_augmentation/classification_MDL.py",
          args=["-c", "cpu", "-b", "50", "-i", "4", "-v", "1000", "-s", "1000", "--mixtype", "mixup",
                "-p", "{cwd}/result"],
          data=["cifar10"], stop="Training loss:4",
          float64_args=["-t", "double"],
          note="mixed-data learning (mixup, alpha drawn by np.random), image_augmentation and "
               "random_shift replayed; ResNet-18; validates on all 10000 test images first"),    Entry("pggan", "image-generation/pggan/train.py",
          args=["-c", "cpu", "-b", "4", "--img-path", "{cwd}/celeba/img_align_celeba_png",
                "--epoch-per-resolution", "1", "--latent", "64", "--monitor-path", "{cwd}/result",
                "--save-image-interval", "1000", "--valid-samples", "4"],
          data=["celeba"], stop="Generator Loss:6",
          note="progressive GAN in nn.auto_forward (dynamic) mode: solvers re-set each step, "
               "F.randn replayed"),    Entry("structured-sparsity-cifar10", "compression/cifar10/structured-sparsity/classification.py",
          args=["-c", "cpu", "-b", "100", "-i", "4", "-v", "10000", "-m", "{cwd}/tmp.monitor",
                "-o", "{cwd}/tmp.monitor"],
          data=["cifar10"], stop="Training loss:4",
          note="group-lasso (filter and channel) regularisation added to the gradients; ResNet-23 "
               "(64 maps); validates on all 10000 test images first"),
    Entry("resnet2rnn-cifar10", "compression/cifar10/resnet2rnn/classification.py",
          args=["-c", "cpu", "-n", "cifar10_resnet2rnn_10_prediction", "-b", "100", "-i", "4",
                "-v", "10000", "-m", "{cwd}/tmp.monitor", "-o", "{cwd}/tmp.monitor"],
          data=["cifar10"], stop="Training loss:4",
          note="ResNet folded into a recurrence (weights shared across unrolled steps); "
               "validates on all 10000 test images first"),
    Entry("inq-cifar10", "compression/cifar10/quantization/classification.py",
          args=["-c", "cpu", "-n", "cifar10_inq_resnet23_prediction", "-i", "4", "-v", "1000",
                "-b", "100", "-m", "{cwd}/tmp.monitor"],
          data=["cifar10"], stop="Training loss:4",
          note="the quantization program with incremental network quantization "
               "(inq_convolution/inq_affine); validates on all 10000 test images first"),    Entry("factorized-svd-cifar10", "compression/cifar10/factorized-layers/classification.py",
          setup=[("compression/cifar10/factorized-layers/classification.py",
                  ["-c", "cpu", "-n", "cifar10_resnet23_prediction", "-i", "1", "-v", "1000",
                   "-b", "100", "-m", "{cwd}/ref", "-o", "{cwd}/ref"])],
          args=["-c", "cpu", "-n", "cifar10_svd_factorized_resnet23_prediction",
                "-t", "{cwd}/ref/params_000000.h5", "-i", "6", "-v", "1000", "-b", "100",
                "-m", "{cwd}/tmp.monitor", "-o", "{cwd}/tmp.monitor"],
          data=["cifar10"], stop="Training loss:6",
          note="ResNet-23 (the program's own, saved by a first run) with every convolution and "
               "affine factored by SVD (PF.svd_convolution / svd_affine with uv_init), then "
               "trained; validates on all 10000 test images first"),
    Entry("distillation-student", "compression/cifar10/distillation/distillation.py",
          setup=[("compression/cifar10/distillation/classification.py",
                  ["-c", "cpu", "-b", "125", "-i", "1", "-v", "1000", "--maps", "16",
                   "-m", "{cwd}/ref", "-o", "{cwd}/ref"])],
          args=["-c", "cpu", "-b", "125", "-i", "6", "-v", "1000", "--maps", "16",
                "-T", "{cwd}/ref/params_000000.h5", "-m", "{cwd}/tmp.monitor", "-o", "{cwd}/tmp.monitor"],
          data=["cifar10"], stop="Training loss:6",
          note="knowledge distillation: a smaller ResNet-23 student learns from the teacher (the "
               "program's own classification.py, run first) through a soft cross entropy; "
               "validates on all 10000 test images first"),
    Entry("sparsity-finetuning", "compression/cifar10/structured-sparsity/finetuning.py",
          setup=[("compression/cifar10/structured-sparsity/classification.py",
                  ["-c", "cpu", "-b", "100", "-i", "1", "-v", "10000", "-m", "{cwd}/ref",
                   "-o", "{cwd}/ref"])],
          args=["-c", "cpu", "-b", "100", "-i", "4", "-v", "10000", "-T", "{cwd}/ref/params_000000.h5",
                "-m", "{cwd}/tmp.monitor", "-o", "{cwd}/tmp.monitor"],
          data=["cifar10"], stop="Training loss:4",
          note="fine-tuning the structured-sparsity ResNet-23 (run first) with filters and "
               "channels masked off by their norms; validates on all 10000 test images first"),
    Entry("pix2pix", "image-translation/pix2pix/pix2pix.py",
          args=["--train", "-c", "cpu", "-e", "1", "-b", "1", "-m", "1000", "-l", "{cwd}/result"],
          data=[("facades", {"train": 6})], stop="Generator loss:5",
          note="pix2pix: U-Net generator with dropout (replayed) and batch normalization at "
               "batch 1, conditional discriminator, L1 + GAN losses; facades JPEG/PNG pairs (one "
               "epoch of 6 images: 5 iterations, the program reads one batch for its shapes)"),
    Entry("stargan", "image-translation/stargan/train.py",
          args=["-c", "cpu", "--image-size", "32", "--g-conv-dim", "16", "--d-conv-dim", "16",
                "--g-repeat-num", "2", "--d-repeat-num", "3", "--batch-size", "4", "--num-data", "16",
                "--max-epoch", "2", "--n-critic", "1", "--log-step", "1", "--sample-step", "1000",
                "--celeba-image-dir", "{cwd}/data/celeba/images",
                "--attr-path", "{cwd}/data/celeba/list_attr_celeba.txt",
                "--monitor-path", "{cwd}/result", "--model-save-path", "{cwd}/result"],
          data=["celeba_attributes"], stop="generator_loss:6",
          float64_args=["--type-config", "double"],
          note="StarGAN: WGAN-GP gradient penalty through nn.grad, unlinked variables, "
               "domain labels permuted by np.random; F.rand replayed"),
]


def select(names):
    by_name = {e.name: e for e in PROGRAMS}
    if not names:
        return list(PROGRAMS)
    missing = [n for n in names if n not in by_name]
    if missing:
        raise SystemExit("catalog: unknown program(s) {} (known: {})".format(
            ", ".join(missing), ", ".join(by_name)))
    return [by_name[n] for n in names]
