"""End-to-end coreference over any transformers encoder: the *independent* variant of Joshi et al. 2019 ("BERT for
Coreference Resolution: Baselines and Analysis", section 2), which SpanBERT (Joshi et al. 2020, section 4.2) uses.

A document arrives as non-overlapping segments, each encoded independently; the model then works on the
document's subwords, in order, as Lee et al. 2018 ("Higher-order Coreference Resolution with Coarse-to-fine
Inference") do on their LSTM's states:

1. Candidate spans: every subword span of at most `max_span_width` within one sentence that starts at a word's
   first subword and ends at a word's last subword.
2. Span representations g_i = [x_start, x_end, x_head, phi(width)] (Lee et al. 2017 section 4): the boundary
   states, an attention-weighted sum of the span's states, and a width embedding.
3. Mention scores s_m(i) = FFNN_m(g_i); the best `top_span_ratio` x (number of words) spans that do not cross an
   already kept span are kept (Lee et al. 2017 section 5).
4. Coarse-to-fine antecedents (Lee et al. 2018 section 3): the bilinear s_c(i, j) = g_i' W_c g_j, added to both
   mention scores, picks the top `max_top_antecedents` earlier spans; the fine score
   s_a(i, j) = FFNN_a([g_i, g_j, g_i * g_j, phi(i, j)]) is added to them, with phi(i, j) the embeddings of the
   bucketed antecedent offset, same speaker, and segment distance (Joshi et al. 2019's code). The dummy antecedent
   scores 0.
5. Higher-order inference (Lee et al. 2018 section 2): `coref_depth` - 1 rounds replace g_i by a gated mix of g_i
   and the expectation of its antecedents' representations under the current scores, then rescore.
6. Loss: the negative marginal log-likelihood of all gold antecedents among the kept ones (the dummy where none
   is kept), summed over the kept spans (Lee et al. 2017 section 5).

Not included: the genre embedding (OntoNotes-only metadata) and Lee et al. 2018's width and distance priors.

This file is copied next to every saved checkpoint (see `auto_map`), with the files it imports relatively.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from transformers import AutoModel, PreTrainedModel
from transformers.modeling_outputs import ModelOutput

from .configuration_coreference import CorefConfig
from .configuration_spanroberta import returns_mean_loss

# Lee et al.'s distance buckets: 0, 1, 2, 3, 4, 5-7, 8-15, 16-31, 32-63, 64+.
NUM_DISTANCE_BUCKETS = 10


def bucket_distance(distances: torch.Tensor) -> torch.Tensor:
    """Exact below 5, then log2 buckets up to 64+ (Lee et al.'s `bucket_distance`)."""
    logspace = torch.floor(torch.log2(distances.clamp(min=1).float())).long() + 3
    return torch.where(distances <= 4, distances, logspace).clamp(0, NUM_DISTANCE_BUCKETS - 1)


def gold_marginal_loss(antecedent_scores: torch.Tensor, antecedent_labels: torch.Tensor) -> torch.Tensor:
    """-sum_i log sum_{gold y in Y(i)} P(y) (Lee et al. 2017 section 5), with P the softmax of each row of
    `antecedent_scores` [K, A + 1] (column 0 the dummy) and `antecedent_labels` [K, A + 1] marking the gold ones
    (each row has at least one). Masked antecedents hold -inf scores."""
    gold_scores = antecedent_scores.masked_fill(~antecedent_labels, float("-inf"))
    return (torch.logsumexp(antecedent_scores, 1) - torch.logsumexp(gold_scores, 1)).sum()


def prune_spans(starts: list[int], ends: list[int], scores: list[float], keep: int) -> list[int]:
    """Indices of the `keep` best-scoring spans that cross no better span (one starting inside another and ending
    after it), sorted by start then end (Lee et al. 2017 section 5; their `extract_spans`)."""
    max_end_starting_at: dict[int, int] = {}
    min_start_ending_at: dict[int, int] = {}
    kept = []
    for index in sorted(range(len(scores)), key=lambda i: -scores[i]):
        if len(kept) == keep:
            break
        start, end = starts[index], ends[index]
        crosses = any(max_end_starting_at.get(j, -1) > end for j in range(start + 1, end + 1)) or any(
            min_start_ending_at.get(j, start) < start for j in range(start, end)
        )
        if crosses:
            continue
        kept.append(index)
        max_end_starting_at[start] = max(max_end_starting_at.get(start, -1), end)
        min_start_ending_at[end] = min(min_start_ending_at.get(end, start), start)
    return sorted(kept, key=lambda i: (starts[i], ends[i]))


def feed_forward(in_size: int, hidden: int, depth: int, out_size: int, dropout: float) -> nn.Sequential:
    """Lee et al.'s FFNN: `depth` ReLU layers of `hidden` units, each followed by dropout, then a projection."""
    layers: list[nn.Module] = []
    for layer in range(depth):
        layers += [nn.Linear(in_size if layer == 0 else hidden, hidden), nn.ReLU(), nn.Dropout(dropout)]
    layers.append(nn.Linear(hidden if depth else in_size, out_size))
    return nn.Sequential(*layers)


@dataclass
class CorefOutput(ModelOutput):
    """loss: the gold marginal (plus the mention loss where configured); top_span_starts/ends [K]: the kept spans
    as subword positions of the document; top_antecedents [K, A]: the index (into the kept spans) of each one's
    candidate antecedents; antecedent_scores [K, A + 1]: their scores, column 0 the dummy (-inf where masked);
    top_span_mention_scores [K]."""

    loss: torch.Tensor | None = None
    top_span_starts: torch.Tensor | None = None
    top_span_ends: torch.Tensor | None = None
    top_antecedents: torch.Tensor | None = None
    antecedent_scores: torch.Tensor | None = None
    top_span_mention_scores: torch.Tensor | None = None


@returns_mean_loss
class CorefModel(PreTrainedModel):
    config_class = CorefConfig
    base_model_prefix = "coref"
    supports_gradient_checkpointing = True

    def __init__(self, config: CorefConfig):
        super().__init__(config)
        self.encoder = AutoModel.from_config(config.encoder_config())
        hidden, features = self.encoder.config.hidden_size, config.feature_size
        span_size = 3 * hidden + features
        pair_features = features * (1 + config.use_speaker_features + config.use_segment_distance)
        self.dropout = nn.Dropout(config.dropout)
        self.width_embeddings = nn.Embedding(config.max_span_width, features)
        self.head_scorer = nn.Linear(hidden, 1)
        self.mention_scorer = feed_forward(span_size, config.ffnn_size, config.ffnn_depth, 1, config.dropout)
        self.coarse_projection = nn.Linear(span_size, span_size)
        self.distance_embeddings = nn.Embedding(NUM_DISTANCE_BUCKETS, features)
        self.speaker_embeddings = nn.Embedding(2, features) if config.use_speaker_features else None
        self.segment_distance_embeddings = (
            nn.Embedding(config.max_segment_distance, features) if config.use_segment_distance else None
        )
        self.antecedent_scorer = feed_forward(
            3 * span_size + pair_features, config.ffnn_size, config.ffnn_depth, 1, config.dropout
        )
        self.refinement_gate = nn.Linear(2 * span_size, span_size)
        self.post_init()

    @classmethod
    def from_encoder(cls, encoder: PreTrainedModel, **settings) -> CorefModel:
        """A coreference model over `encoder` (a loaded AutoModel: its weights are copied), with fresh task layers;
        `settings` are CorefConfig's."""
        model = cls(CorefConfig(encoder=encoder.config.to_dict(), **settings))
        model.encoder.load_state_dict(encoder.state_dict())
        return model

    def get_input_embeddings(self) -> nn.Module:
        return self.encoder.get_input_embeddings()

    def forward(
        self,
        input_ids: torch.LongTensor,
        attention_mask: torch.Tensor,
        content_mask: torch.Tensor,
        sentence_map: torch.LongTensor,
        word_map: torch.LongTensor,
        speaker_ids: torch.LongTensor | None = None,
        gold_starts: torch.LongTensor | None = None,
        gold_ends: torch.LongTensor | None = None,
        gold_cluster_ids: torch.LongTensor | None = None,
        **kwargs,
    ) -> CorefOutput:
        r"""One document. input_ids, attention_mask [S, L]: its segments, padded; content_mask [S, L]: 1 at the
        document's subwords (not the special tokens or padding), whose states make the sequence of T subwords the
        rest reads. sentence_map, word_map, speaker_ids [T]: each subword's sentence, word and speaker. gold_starts,
        gold_ends, gold_cluster_ids [M]: the gold mentions (subword positions, ends inclusive) and their cluster
        (from 1); without them no loss is computed."""
        states = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state  # [S, L, H]
        content = content_mask.bool()
        # No dropout here: Joshi et al.'s code reads the encoder's output as it is (the encoder has its own).
        tokens = states[content]  # [T, H]
        segment_of_token = torch.arange(len(input_ids), device=tokens.device)[:, None].expand_as(content)[content]

        starts, ends = self._candidate_spans(sentence_map, word_map)  # [C]
        spans = self._span_representations(tokens, starts, ends)  # [C, D]
        mention_scores = self.mention_scorer(spans).squeeze(-1)  # [C]

        num_words = int((word_map[1:] != word_map[:-1]).sum()) + 1
        keep = max(1, int(num_words * self.config.top_span_ratio))
        kept = prune_spans(starts.tolist(), ends.tolist(), mention_scores.tolist(), keep)
        top = torch.tensor(kept, dtype=torch.long, device=tokens.device)  # [K]
        top_starts, top_ends, top_spans, top_scores = starts[top], ends[top], spans[top], mention_scores[top]

        antecedents, fast_scores, antecedent_mask = self._coarse_antecedents(top_spans, top_scores)  # [K, A]
        pair_features = self._pair_features(antecedents, top_starts, segment_of_token, speaker_ids)  # [K, A, 3F]
        for round_ in range(self.config.coref_depth):
            if round_ > 0:
                top_spans = self._refine(top_spans, antecedents, scores)
            fine = self._fine_scores(top_spans, antecedents, pair_features)  # [K, A]
            scores = (fast_scores + fine).masked_fill(~antecedent_mask, float("-inf"))
        antecedent_scores = torch.cat([scores.new_zeros(len(scores), 1), scores], dim=1)  # [K, A + 1]

        loss = None
        if gold_starts is not None:
            labels = self._antecedent_labels(top_starts, top_ends, antecedents, antecedent_mask,
                                             gold_starts, gold_ends, gold_cluster_ids)  # fmt: skip
            loss = gold_marginal_loss(antecedent_scores, labels)
            if self.config.mention_loss_weight:
                is_gold = ((starts[:, None] == gold_starts) & (ends[:, None] == gold_ends)).any(1)
                # The mean over candidates, scaled to the kept spans the antecedent loss sums over.
                mention_loss = F.binary_cross_entropy_with_logits(mention_scores, is_gold.float()) * len(top)
                loss = loss + self.config.mention_loss_weight * mention_loss
        return CorefOutput(loss=loss, top_span_starts=top_starts, top_span_ends=top_ends, top_antecedents=antecedents,
                           antecedent_scores=antecedent_scores, top_span_mention_scores=top_scores)  # fmt: skip

    def _candidate_spans(self, sentence_map: torch.Tensor, word_map: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        num_tokens = len(word_map)
        word_start = torch.ones_like(word_map, dtype=torch.bool)
        word_start[1:] = word_map[1:] != word_map[:-1]
        word_end = torch.ones_like(word_start)
        word_end[:-1] = word_start[1:]
        starts = torch.arange(num_tokens, device=word_map.device)[:, None]  # [T, 1]
        ends = starts + torch.arange(self.config.max_span_width, device=word_map.device)  # [T, W]
        inside = ends < num_tokens
        ends = ends.clamp(max=num_tokens - 1)
        valid = inside & (sentence_map[starts] == sentence_map[ends]) & word_start[starts] & word_end[ends]
        return starts.expand_as(ends)[valid], ends[valid]

    def _span_representations(self, tokens: torch.Tensor, starts: torch.Tensor, ends: torch.Tensor) -> torch.Tensor:
        """g_i = [x_start, x_end, x_head, phi(width)] (Lee et al. 2017 section 4), [C, 3H + F]."""
        head = self._head_grid(tokens)[starts, ends - starts]  # [C, H]
        width = self.dropout(self.width_embeddings(ends - starts))  # [C, F]
        return torch.cat([tokens[starts], tokens[ends], head, width], dim=-1)

    def _head_grid(self, tokens: torch.Tensor) -> torch.Tensor:
        """x_head of every span start t and width w + 1 at once, [T, W, H]: the softmax of the head scores over
        tokens t..t+w weighting their states. The windows are views of the states, so memory grows with T x W x H
        rather than with the candidates x W x H of gathering each span's tokens."""
        width = self.config.max_span_width
        logits = F.pad(self.head_scorer(tokens).squeeze(-1), (0, width - 1), value=float("-inf"))  # [T + W - 1]
        windows = F.pad(tokens, (0, 0, 0, width - 1)).unfold(0, width, 1).transpose(1, 2)  # [T, W, H]
        offsets = torch.arange(width, device=tokens.device)
        in_span = offsets[None, :] <= offsets[:, None]  # [W (width), W (offset)]
        weights = logits.unfold(0, width, 1)[:, None, :].masked_fill(~in_span, float("-inf")).softmax(-1)  # [T, W, W]
        return torch.bmm(weights, windows)

    def _coarse_antecedents(self, spans: torch.Tensor, mention_scores: torch.Tensor):
        """The top antecedents of each kept span by s_m(i) + s_m(j) + s_c(i, j) among the earlier ones (Lee et al.
        2018 section 3): indices [K, A], those scores [K, A] and which are real antecedents [K, A]."""
        num_spans = len(spans)
        earlier = torch.arange(num_spans, device=spans.device)
        earlier = earlier[:, None] > earlier[None, :]  # [K, K]
        # Dropout on both sides, each with its own mask, as Joshi et al.'s `get_fast_antecedent_scores`.
        bilinear = self.dropout(self.coarse_projection(spans)) @ self.dropout(spans).T  # [K, K]
        fast = (mention_scores[:, None] + mention_scores[None, :] + bilinear).masked_fill(~earlier, float("-inf"))
        top = min(self.config.max_top_antecedents, num_spans)
        fast_scores, antecedents = fast.topk(top, dim=1)  # [K, A]
        return antecedents, fast_scores, earlier.gather(1, antecedents)

    def _pair_features(self, antecedents, top_starts, segment_of_token, speaker_ids) -> torch.Tensor:
        """phi(i, j): the bucketed offset between the kept spans, same speaker and segment distance, [K, A, nF]."""
        offsets = torch.arange(len(antecedents), device=antecedents.device)[:, None] - antecedents
        features = [self.distance_embeddings(bucket_distance(offsets.clamp(min=0)))]
        if self.speaker_embeddings is not None:
            speakers = speaker_ids[top_starts] if speaker_ids is not None else torch.zeros_like(top_starts)
            features.append(self.speaker_embeddings((speakers[:, None] == speakers[antecedents]).long()))
        if self.segment_distance_embeddings is not None:
            segments = segment_of_token[top_starts]
            distance = (segments[:, None] - segments[antecedents]).clamp(0, self.config.max_segment_distance - 1)
            features.append(self.segment_distance_embeddings(distance))
        return self.dropout(torch.cat(features, dim=-1))

    def _fine_scores(self, spans: torch.Tensor, antecedents: torch.Tensor, pair_features: torch.Tensor):
        """s_a(i, j) = FFNN_a([g_i, g_j, g_i * g_j, phi(i, j)]), [K, A]. The first layer is applied to each part
        on its own (W [a; b; c; d] = W_a a + W_b b + W_c c + W_d d), so that g_i and g_j are projected once per
        span and the [K, A, 3D + nF] concatenation is never built."""
        first, rest = self.antecedent_scorer[0], self.antecedent_scorer[1:]
        size = spans.shape[-1]
        weight = first.weight  # [h, 3D + nF]
        target = spans @ weight[:, :size].T  # [K, h]
        candidate = spans @ weight[:, size:2 * size].T  # [K, h]
        product = (spans[:, None] * spans[antecedents]) @ weight[:, 2 * size:3 * size].T  # [K, A, h]
        features = pair_features @ weight[:, 3 * size:].T  # [K, A, h]
        hidden = target[:, None] + candidate[antecedents] + product + features + first.bias
        return rest(hidden).squeeze(-1)

    def _refine(self, spans: torch.Tensor, antecedents: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        """Higher-order inference (Lee et al. 2018 section 2): a_i = sum_y P(y) g_y (the dummy standing for g_i
        itself), f_i = sigmoid(W_f [g_i, a_i]), g_i <- f_i * a_i + (1 - f_i) * g_i."""
        weights = torch.cat([scores.new_zeros(len(scores), 1), scores], dim=1).softmax(-1)  # [K, A + 1]
        candidates = torch.cat([spans[:, None], spans[antecedents]], dim=1)  # [K, A + 1, D]
        attended = (weights.unsqueeze(-1) * candidates).sum(1)  # [K, D]
        gate = torch.sigmoid(self.refinement_gate(torch.cat([spans, attended], dim=-1)))
        return gate * attended + (1 - gate) * spans

    @staticmethod
    def _antecedent_labels(top_starts, top_ends, antecedents, antecedent_mask, gold_starts, gold_ends,
                           gold_cluster_ids) -> torch.Tensor:  # fmt: skip
        """[K, A + 1]: which candidate antecedents are gold (same gold cluster); the dummy where none is."""
        matches = (top_starts[:, None] == gold_starts) & (top_ends[:, None] == gold_ends)  # [K, M]
        cluster = (matches.long() * gold_cluster_ids).amax(1) if len(gold_starts) else torch.zeros_like(top_starts)
        same = (cluster[antecedents] == cluster[:, None]) & (cluster[:, None] > 0) & antecedent_mask  # [K, A]
        return torch.cat([~same.any(1, keepdim=True), same], dim=1)


# save_pretrained copies this file and the files it imports next to the weights; auto_map points AutoModel here.
CorefConfig.register_for_auto_class()
CorefModel.register_for_auto_class("AutoModel")

__all__ = ["CorefModel", "CorefOutput", "bucket_distance", "gold_marginal_loss", "prune_spans"]
